//! Peer benchmarks, group 1 (`BENCHMARKS.md`): the hot path of admitting and releasing one
//! request, lameduck against the floor (a bare atomic pair) and its peers, in one criterion
//! run. Goals: lameduck's borrowed admit + release within 1.25x the bare pair, and no slower
//! than any peer.
//!
//! `scripts/bench-hot-path.sh` runs this and prints each variant's median as a multiple of
//! the bare pair of the same thread setting. Groups:
//! * `hot_path/single_thread`: one admit + release per iteration.
//! * `hot_path/two_threads`: the same, while a background thread runs the same operation on
//!   the same object in a loop (started and seen running before the measurement, stopped
//!   after it); the main thread's batches are timed with `iter_custom`.
//!
//! The variants are in `lameduck_bench::hot`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Bencher, BenchmarkGroup, Criterion};
use hyper_util::server::graceful::GracefulShutdown;
use lameduck_bench::hot::{self, CachePadded};
use tokio_util::task::TaskTracker;

struct Subjects {
    word: CachePadded<AtomicUsize>,
    shared: std::sync::Arc<lameduck::Shared>,
    tracker: TaskTracker,
    graceful: GracefulShutdown,
    watch_tx: tokio::sync::watch::Sender<()>,
}

fn subjects() -> Subjects {
    Subjects {
        word: CachePadded(AtomicUsize::new(0)),
        shared: hot::prepared_shared(),
        tracker: TaskTracker::new(),
        graceful: GracefulShutdown::new(),
        watch_tx: hot::hyper_util_channel(),
    }
}

/// One admit + release on the subjects.
type Op = fn(&Subjects);

/// The variants by name.
const VARIANTS: [(&str, Op); 7] = [
    ("bare_pair", |s| hot::bare_pair(&s.word.0)),
    ("lameduck_borrowed", |s| {
        hot::lameduck_borrowed(s.shared.gate())
    }),
    ("lameduck_owned", |s| hot::lameduck_owned(&s.shared)),
    ("tokio_util_token", |s| hot::tokio_util_token(&s.tracker)),
    ("tokio_util_track_ready", |s| {
        hot::tokio_util_track_ready(&s.tracker)
    }),
    ("hyper_util_watcher", |s| {
        hot::hyper_util_watcher(&s.graceful)
    }),
    ("hyper_util_watch_ready", |s| {
        hot::hyper_util_watch_ready(&s.watch_tx)
    }),
];

fn check_released(s: &Subjects) {
    assert_eq!(s.word.0.load(Ordering::Relaxed), 0);
    assert_eq!(s.shared.gate().normal_in_flight(), 0);
    assert!(s.tracker.is_empty());
    assert_eq!(s.graceful.count(), 0);
    assert_eq!(s.watch_tx.receiver_count(), 0);
}

fn single_thread(c: &mut Criterion) {
    let s = subjects();
    let mut group = c.benchmark_group("hot_path/single_thread");
    for (name, op) in VARIANTS {
        group.bench_function(name, |b| b.iter(|| op(&s)));
    }
    group.finish();
    check_released(&s);
}

/// Runs `op` on the main thread under criterion's clock while a second thread runs it in a
/// loop on the same subjects.
fn contended(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    s: &Subjects,
    op: Op,
) {
    let stop = CachePadded(AtomicBool::new(false));
    let started = CachePadded(AtomicBool::new(false));
    thread::scope(|scope| {
        let hammer = scope.spawn(|| {
            started.0.store(true, Ordering::Release);
            let since = std::time::Instant::now();
            let mut batches = 0u64;
            while !stop.0.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    op(s);
                }
                batches += 1;
            }
            (batches * 64, since.elapsed())
        });
        while !started.0.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        group.bench_function(name, |b: &mut Bencher<'_>| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    op(s);
                }
                start.elapsed()
            });
        });
        stop.0.store(true, Ordering::Relaxed);
        let (ops, elapsed) = hammer.join().expect("background thread");
        let secs = elapsed.as_secs_f64();
        // Evidence that the contention was real (another load can deschedule the thread).
        eprintln!(
            "  background thread: {ops} ops in {secs:.2} s ({:.1} ns/op)",
            secs * 1e9 / ops as f64
        );
    });
}

fn two_threads(c: &mut Criterion) {
    let s = subjects();
    let mut group = c.benchmark_group("hot_path/two_threads");
    for (name, op) in VARIANTS {
        contended(&mut group, name, &s, op);
    }
    group.finish();
    check_released(&s);
}

/// About 4 s per benchmark, 14 benchmarks: the run stays near a minute. Command-line options
/// still override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = hot_path;
    config = config();
    targets = single_thread, two_threads
}
criterion_main!(hot_path);
