//! Admission gate and shutdown sequence benchmarks.
//!
//! The target is relative, not absolute: one borrowed admit + release must cost at most 1.5x
//! a bare `fetch_add(Relaxed)` + `fetch_sub(AcqRel)` pair measured in the same run. `scripts/bench-gate.sh` runs this bench and computes the ratios; compare only
//! numbers from one run, the machines this runs on are shared and noisy.
//!
//! Groups:
//! * `admit_release/single_thread`: `bare_pair`, `borrowed_normal`, `owned_normal`
//!   (through [`Shared::admit`], which also clones and drops the `Arc`) and
//!   `borrowed_long_running`.
//! * `admit_release/two_threads_contending`: the same four, while a background thread runs
//!   the same operation on the same counter (or gate) in a loop.
//! * `shutdown_sequence`: one whole termination through the machine on a simulated clock.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Bencher, BenchmarkGroup, Criterion};
use lameduck::gate::Gate;
use lameduck::machine::HookKind;
use lameduck::machine::HookOutcome;
use lameduck::sim::Simulator;
use lameduck::{Admission, Config, Lifecycle, LifecycleSignal, RequestClass, Shared};

/// Keeps the hammered word off the cache line of anything else the threads touch (the
/// stop flag in particular), so the contention measured is on the word alone.
#[repr(align(128))]
struct CachePadded<T>(T);

/// The baseline: the two read-modify-writes an admission and a release must do at least.
/// The gate adds 2 (its low bit is the closed flag) and branches on the previous values, so
/// the results are kept too.
#[inline(always)]
fn bare_pair(word: &AtomicUsize) {
    let word = black_box(word);
    black_box(word.fetch_add(1, Ordering::Relaxed));
    black_box(word.fetch_sub(1, Ordering::AcqRel));
}

#[inline(always)]
fn borrowed_normal(gate: &Gate) {
    let ticket = black_box(gate).admit_normal();
    drop(black_box(ticket));
}

#[inline(always)]
fn borrowed_long_running(gate: &Gate) {
    let ticket = black_box(gate).admit_long_running();
    drop(black_box(ticket));
}

#[inline(always)]
fn owned_normal(shared: &Arc<Shared>) {
    let admission = black_box(shared).admit(RequestClass::Normal);
    debug_assert!(matches!(admission, Admission::Normal(_)));
    drop(black_box(admission));
}

/// A prepared lifecycle's shared state, as request handlers get it (the machine itself is
/// dropped: only the shared state is exercised here).
fn prepared_shared() -> Arc<Shared> {
    Lifecycle::new(Config::default()).prepare().shared().clone()
}

fn single_thread(c: &mut Criterion) {
    let word = CachePadded(AtomicUsize::new(0));
    let shared = prepared_shared();
    let mut group = c.benchmark_group("admit_release/single_thread");
    group.bench_function("bare_pair", |b| b.iter(|| bare_pair(&word.0)));
    group.bench_function("borrowed_normal", |b| {
        b.iter(|| borrowed_normal(shared.gate()))
    });
    group.bench_function("owned_normal", |b| b.iter(|| owned_normal(&shared)));
    group.bench_function("borrowed_long_running", |b| {
        b.iter(|| borrowed_long_running(shared.gate()))
    });
    group.finish();
    assert_eq!(shared.gate().normal_in_flight(), 0);
    assert_eq!(shared.gate().long_running_in_flight(), 0);
}

/// Runs `op` on the main thread under criterion's clock while a second thread runs
/// `background` in a loop. The background thread starts (and is seen running) before the
/// measurement and stops after it; each batch is timed with `iter_custom`.
fn contended<F, G>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    op: F,
    background: G,
) where
    F: Fn() + Sync,
    G: Fn() + Sync,
{
    let stop = CachePadded(AtomicBool::new(false));
    let started = CachePadded(AtomicBool::new(false));
    thread::scope(|s| {
        let hammer = s.spawn(|| {
            started.0.store(true, Ordering::Release);
            let since = std::time::Instant::now();
            let mut batches = 0u64;
            while !stop.0.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    background();
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
                    op();
                }
                start.elapsed()
            });
        });
        stop.0.store(true, Ordering::Relaxed);
        let (ops, elapsed) = hammer.join().expect("background thread");
        let secs = elapsed.as_secs_f64();
        // Evidence that the contention was real: the background thread kept running at a
        // rate close to the main thread's (on a 2-core machine other load can deschedule it).
        eprintln!(
            "  background thread: {ops} ops in {secs:.2} s ({:.1} ns/op)",
            secs * 1e9 / ops as f64
        );
    });
}

fn two_threads_contending(c: &mut Criterion) {
    let word = CachePadded(AtomicUsize::new(0));
    let shared = prepared_shared();
    let gate = shared.gate();
    let mut group = c.benchmark_group("admit_release/two_threads_contending");
    contended(
        &mut group,
        "bare_pair",
        || bare_pair(&word.0),
        || bare_pair(&word.0),
    );
    contended(
        &mut group,
        "borrowed_normal",
        || borrowed_normal(gate),
        || borrowed_normal(gate),
    );
    contended(
        &mut group,
        "owned_normal",
        || owned_normal(&shared),
        || owned_normal(&shared),
    );
    contended(
        &mut group,
        "borrowed_long_running",
        || borrowed_long_running(gate),
        || borrowed_long_running(gate),
    );
    group.finish();
    assert_eq!(gate.normal_in_flight(), 0);
    assert_eq!(gate.long_running_in_flight(), 0);
}

const NORMAL: usize = 10;
const LONG_RUNNING: usize = 10;

/// A serving machine (one listener, two pre-shutdown hooks, 1 s shutdown delay, 1 s watch
/// grace) at T+0 on a simulated clock.
fn serving() -> Simulator {
    let config = Config::builder()
        .shutdown_delay(Duration::from_secs(1))
        .shutdown_watch_termination_grace_period(Duration::from_secs(1))
        .build()
        .expect("valid config");
    Simulator::serving(config, |m| {
        m.add_hook(HookKind::PreShutdown, "flush").expect("hook");
        m.add_hook(HookKind::PreShutdown, "deregister")
            .expect("hook");
    })
    .expect("serving")
}

/// Opens 10 normal and 10 long-running requests, receives SIGTERM, finishes both hooks,
/// lets the shutdown delay pass (the gate closes with all 20 in flight), ends every
/// request (the long-running ones on their paced turns) and runs to exit.
fn shutdown(mut sim: Simulator) -> Simulator {
    for _ in 0..NORMAL {
        assert!(sim.open_request(RequestClass::Normal));
    }
    for _ in 0..LONG_RUNNING {
        assert!(sim.open_request(RequestClass::LongRunning));
    }
    sim.stop().expect("stop");
    let hooks: Vec<_> = sim
        .machine
        .hooks(HookKind::PreShutdown)
        .map(|(id, _)| id)
        .collect();
    for hook in hooks {
        sim.finish_hook(hook, HookOutcome::Succeeded)
            .expect("hook report");
    }
    sim.advance(Duration::from_secs(1));
    // Normal ones end at once; long-running ones are held until their paced turns, which
    // `run_to_exit` reaches on the simulated clock.
    for _ in 0..NORMAL + LONG_RUNNING {
        sim.end_request(0);
    }
    let exit = sim.run_to_exit(10_000);
    black_box(exit);
    sim
}

fn shutdown_sequence(c: &mut Criterion) {
    // The scenario is what it claims to be: the gate closed with everything in flight,
    // the long-running drain was paced, and the machine exited 0.
    let sim = shutdown(serving());
    assert_eq!(sim.exit, Some(0), "{:?}", sim.log);
    assert_eq!(sim.open_requests(), 0);
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    let plan = sim.log.iter().find_map(|(_, e)| match e {
        lameduck::Event::DrainStarted(plan) => Some(*plan),
        _ => None,
    });
    let plan = plan.expect("drain started");
    assert_eq!(plan.normal_in_flight, NORMAL);
    assert_eq!(plan.long_running_in_flight, LONG_RUNNING);
    assert!(plan.pacing_interval.is_some());
    sim.check_trace().expect("legal trace");

    let mut group = c.benchmark_group("shutdown_sequence");
    // From a serving machine (built outside the timing) to exit.
    group.bench_function("from_serving", |b| {
        b.iter_batched(serving, shutdown, BatchSize::SmallInput)
    });
    // Including building, preparing and starting the machine, and dropping it.
    group.bench_function("including_setup", |b| b.iter(|| shutdown(serving())));
    group.finish();
}

/// ~3 s of measurement per benchmark keeps the whole bench under a minute; command-line
/// options still override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = gate_benches;
    config = config();
    targets = single_thread, two_threads_contending, shutdown_sequence
}
criterion_main!(gate_benches);
