//! Peer benchmarks, group 1 (`BENCHMARKS.md`): heap allocations per admit + release, for
//! lameduck and its peers (the variants of `lameduck_bench::hot`), counted with a counting
//! global allocator over 10,000 operations after one warm-up operation; the goal is zero.
//! Prints a table; exits 1 if a lameduck variant allocates.
//!
//! `bench_alloc --only VARIANT --ops N` instead runs one variant N times and prints nothing:
//! run under `valgrind --tool=callgrind` with two values of N, the difference of the
//! instruction totals divided by the difference of N is the variant's instructions per
//! admit + release (`scripts/bench-hot-path.sh` does this).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hyper_util::server::graceful::GracefulShutdown;
use lameduck_bench::hot;
use tokio_util::task::TaskTracker;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const OPS: u64 = 10_000;

fn count(op: &dyn Fn()) -> u64 {
    op(); // warm-up: lazily initialised state (thread locals) is not per request
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..OPS {
        op();
    }
    ALLOCS.load(Ordering::Relaxed) - before
}

fn main() {
    let word = hot::CachePadded(AtomicUsize::new(0));
    let shared = hot::prepared_shared();
    let tracker = TaskTracker::new();
    let graceful = GracefulShutdown::new();
    let watch_tx = hot::hyper_util_channel();
    let rows: [(&str, &dyn Fn()); 7] = [
        ("bare_pair", &|| hot::bare_pair(&word.0)),
        ("lameduck_borrowed", &|| {
            hot::lameduck_borrowed(shared.gate())
        }),
        ("lameduck_owned", &|| hot::lameduck_owned(&shared)),
        ("tokio_util_token", &|| hot::tokio_util_token(&tracker)),
        ("tokio_util_track_ready", &|| {
            hot::tokio_util_track_ready(&tracker)
        }),
        ("hyper_util_watcher", &|| hot::hyper_util_watcher(&graceful)),
        ("hyper_util_watch_ready", &|| {
            hot::hyper_util_watch_ready(&watch_tx)
        }),
    ];
    let args = lameduck_bench::args::Args::from_env(&[]);
    if let Some(only) = args.value("--only") {
        let ops: u64 = args.get("--ops", 100_000);
        let (_, op) = rows
            .iter()
            .find(|(name, _)| *name == only)
            .unwrap_or_else(|| lameduck_bench::args::fail(&format!("unknown variant {only}")));
        for _ in 0..ops {
            op();
        }
        return;
    }
    // The counter works: a Vec allocates.
    let probe = count(&|| drop(std::hint::black_box(vec![1u8; 16])));
    assert_eq!(probe, OPS, "the counting allocator does not count");
    println!(
        "{:<24} {:>12} {:>16}",
        "variant", "allocations", "per admit+release"
    );
    let mut failed = false;
    for (name, op) in rows {
        let n = count(op);
        println!("{name:<24} {n:>12} {:>16.3}", n as f64 / OPS as f64);
        failed |= name.starts_with("lameduck") && n != 0;
    }
    println!("({OPS} operations each after one warm-up; a Vec probe counted {probe})");
    if failed {
        eprintln!("a lameduck variant allocated");
        std::process::exit(1);
    }
}
