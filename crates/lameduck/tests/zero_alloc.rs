//! The admission hot path allocates nothing: admitting and releasing requests (borrowed
//! tickets and owned ones through `Shared::admit`), reserving paced turns while
//! the long-running drain runs, and rejecting once the gate is closed.
//!
//! A counting global allocator wraps the system allocator. Only allocations made by a
//! thread inside [`count_allocations`] are counted, and one counting section runs at a time,
//! so the test harness and tests running in parallel do not disturb the count. The shared
//! state is built before counting starts. [`health_evaluation_allocates`] checks that the
//! counter does see allocations, so the zero assertions can fail.
//!
//! The library forbids `unsafe`; this test crate needs it for the allocator only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lameduck::sim::Simulator;
use lameduck::{Admission, Config, Instant, Lifecycle, LifecycleSignal, RequestClass, Shared};

/// Allocation calls (`alloc`, `alloc_zeroed`, `realloc`) made while counting.
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// One counting section at a time.
static SECTION: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread is inside a counting section. `const`-initialised and without a
    /// destructor, so reading it never allocates.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

struct CountingAllocator;

impl CountingAllocator {
    #[inline]
    fn record(&self) {
        if COUNTING.try_with(Cell::get).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is forwarded unchanged to `System`; the bookkeeping touches only an
// atomic and a `const` thread-local, neither of which allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.record();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.record();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.record();
        // SAFETY: `ptr` was allocated by this allocator, that is by `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, that is by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Runs `f` and returns the number of allocation calls this thread made during it.
fn count_allocations<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let _section = SECTION.lock().unwrap_or_else(PoisonError::into_inner);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    (after - before, r)
}

const N: usize = 10_000;

/// A prepared lifecycle's shared state, as request handlers get it.
fn prepared_shared() -> Arc<Shared> {
    Lifecycle::new(Config::default()).prepare().shared().clone()
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    borrowed_normal: usize,
    borrowed_long_running: usize,
    owned_normal: usize,
    owned_long_running: usize,
    exempt: usize,
    paced: usize,
    rejected: usize,
}

#[test]
fn admitting_and_releasing_allocates_nothing() {
    let shared = prepared_shared();
    let gate = shared.gate();
    let now = Instant::from_secs(1);
    // Room for a batch held open at once, reserved before counting.
    let mut held = Vec::with_capacity(N);

    let (allocations, tally) = count_allocations(|| {
        let mut tally = Tally::default();
        for _ in 0..N {
            // Borrowed tickets, released at once.
            if let Ok(ticket) = gate.admit_normal() {
                tally.borrowed_normal += 1;
                drop(ticket);
            }
            if let Ok(ticket) = gate.admit_long_running() {
                tally.borrowed_long_running += 1;
                // Not draining: no pacing, the stream may end at once.
                tally.paced += usize::from(ticket.reserve_turn(now).is_some());
                drop(ticket);
            }
            // Owned tickets through the admission layer's entry point.
            if let Admission::Normal(ticket) = shared.admit(RequestClass::Normal) {
                tally.owned_normal += 1;
                drop(ticket);
            }
            if let Admission::LongRunning(ticket) = shared.admit(RequestClass::LongRunning) {
                tally.owned_long_running += 1;
                tally.paced += usize::from(ticket.reserve_turn(now).is_some());
                drop(ticket);
            }
            // Exempt paths are tracked like normal ones while the gate is open.
            if let Admission::Exempt(ticket) = shared.admit(RequestClass::Exempt) {
                tally.exempt += 1;
                drop(ticket);
            }
        }
        // Many in flight at once, then released together.
        for _ in 0..N {
            if let Ok(ticket) = gate.admit_normal() {
                held.push(ticket);
            }
        }
        let in_flight = gate.normal_in_flight();
        held.clear();
        (tally, in_flight)
    });

    let (tally, in_flight) = tally;
    assert_eq!(
        tally,
        Tally {
            borrowed_normal: N,
            borrowed_long_running: N,
            owned_normal: N,
            owned_long_running: N,
            exempt: N,
            paced: 0,
            rejected: 0,
        }
    );
    assert_eq!(in_flight, N);
    assert_eq!(gate.normal_in_flight(), 0);
    assert_eq!(gate.long_running_in_flight(), 0);
    assert_eq!(allocations, 0, "the admission hot path allocated");
}

#[test]
fn paced_drain_and_rejections_allocate_nothing() {
    // A real termination: the machine closes the gate with every request in flight and
    // starts pacing the long-running drain (2N streams over 10 s: one every 0.5 ms).
    let config = Config::builder()
        .shutdown_watch_termination_grace_period(Duration::from_secs(10))
        .build()
        .expect("valid config");
    let mut sim = Simulator::serving(config, |_| {}).expect("serving");
    let shared = sim.shared().expect("prepared");
    let gate = shared.gate();
    let mut normal = Vec::with_capacity(N);
    let mut borrowed = Vec::with_capacity(N);
    let mut owned = Vec::with_capacity(N);

    // Admissions while serving (into the vectors reserved above).
    let (allocations, ()) = count_allocations(|| {
        for _ in 0..N {
            if let Ok(t) = gate.admit_normal() {
                normal.push(t);
            }
            if let Ok(t) = gate.admit_long_running() {
                borrowed.push(t);
            }
            if let Admission::LongRunning(t) = shared.admit(RequestClass::LongRunning) {
                owned.push(t);
            }
        }
    });
    assert_eq!(allocations, 0, "admitting while serving allocated");
    assert_eq!((normal.len(), borrowed.len(), owned.len()), (N, N, N));

    // The machine's part (not counted: it logs events).
    sim.stop().expect("stop");
    sim.advance(Duration::ZERO);
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
    assert!(gate.is_closed());
    assert_eq!(gate.long_running_in_flight(), 2 * N);
    let now = sim.now;

    // Ending everything with the drain paced, then being turned away.
    let (allocations, tally) = count_allocations(|| {
        let mut tally = Tally::default();
        // Normal ones end; the last one out of the closed group notifies drain waiters.
        while let Some(t) = normal.pop() {
            tally.borrowed_normal += 1;
            drop(t);
        }
        // Each stream reserves its paced turn (the adapter would hold the ticket until
        // then; the reservation itself is the hot path).
        while let Some(t) = borrowed.pop() {
            tally.borrowed_long_running += 1;
            tally.paced += usize::from(t.reserve_turn(now).is_some());
            drop(t);
        }
        while let Some(t) = owned.pop() {
            tally.owned_long_running += 1;
            tally.paced += usize::from(t.reserve_turn(now).is_some());
            drop(t);
        }
        for _ in 0..N {
            tally.rejected += usize::from(gate.admit_normal().is_err());
            tally.rejected += usize::from(gate.admit_long_running().is_err());
            tally.rejected += usize::from(matches!(
                shared.admit(RequestClass::Normal),
                Admission::Rejected(_)
            ));
            tally.rejected += usize::from(matches!(
                shared.admit(RequestClass::LongRunning),
                Admission::Rejected(_)
            ));
        }
        tally
    });
    assert_eq!(allocations, 0, "the paced drain or a rejection allocated");
    assert_eq!(tally.borrowed_normal, N);
    assert_eq!(tally.borrowed_long_running, N);
    assert_eq!(tally.owned_long_running, N);
    assert_eq!(tally.rejected, 4 * N);
    // Pacing really was active: all but the first (burst 1) got a later turn.
    assert!(
        tally.paced > N,
        "only {} of {} streams were paced",
        tally.paced,
        2 * N
    );
    assert!(gate.normal_drained());
    assert!(gate.long_running_drained());
}

#[test]
fn health_evaluation_allocates() {
    // The sanity check: the counter sees this thread's allocations.
    let shared = prepared_shared();
    let (allocations, response) =
        count_allocations(|| shared.health("/readyz", Some("verbose"), Instant::ZERO));
    let response = response.expect("a health path");
    assert_eq!(response.status, 200);
    assert!(
        allocations > 0,
        "the counting allocator saw no allocation from a verbose /readyz"
    );
}
