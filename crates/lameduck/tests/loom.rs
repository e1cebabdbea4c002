//! loom model checks of the gate's atomics. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p lameduck --test loom --release`
//!
//! `--cfg loom` reaches every crate, so `event-listener` must be built with its `loom`
//! feature under `cfg(loom)` (it does not compile otherwise); its `Event` then uses loom's
//! mutex and atomics too, and the waiter tests below check that no drain wake-up is lost.
//!
//! The gate-only models are exhaustive and take well under a second in release mode. The
//! two drain-waiter models block in `event-listener`, whose loom mutex makes the full state
//! space too large (unbounded: not done in 15 minutes); they run with at most
//! [`MAX_PREEMPTIONS`] (3) preemptions, about 2 s, unless `LOOM_MAX_PREEMPTIONS` is set.
//! The whole file takes about 5 s.
//!
//! Closing the gate is the lifecycle machine's alone (`Gate::close` is not public); these
//! models close it through `lameduck::gate::testing`, which exists only under `cfg(loom)`
//! and `cfg(fuzzing)`.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Wake, Waker};

use event_listener::{EventListener, Listener};
use lameduck::gate::testing::close;
use lameduck::gate::{Gate, Rejection};
use lameduck::ShutdownMode;
use loom::sync::mpsc::channel;
use loom::sync::Arc;
use loom::thread;

/// The preemption bound of the drain-waiter models: 3 takes about 2 s in release mode, 4
/// about 17 s. Bound 3 already finds the lost wake-up when the back-out path does not
/// notify.
const MAX_PREEMPTIONS: usize = 3;

/// A model bounded to `MAX_PREEMPTIONS` preemptions unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise.
fn model_bounded(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(MAX_PREEMPTIONS);
    }
    builder.check(f);
}

struct NoopWaker;

impl Wake for NoopWaker {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// Whether `listener` was notified, without blocking.
fn is_notified(listener: &mut EventListener) -> bool {
    // `Waker::noop` needs Rust 1.85; the crate's MSRV is 1.80.
    let waker = Waker::from(std::sync::Arc::new(NoopWaker));
    Pin::new(listener)
        .poll(&mut Context::from_waker(&waker))
        .is_ready()
}

/// Blocks (in loom's sense) until `drained(gate)`, the way a driver waits: listen, re-check,
/// wait. A lost wake-up leaves every thread blocked, which loom reports as a deadlock.
fn wait_until(gate: &Gate, drained: impl Fn(&Gate) -> bool) {
    loop {
        if drained(gate) {
            return;
        }
        let listener = gate.listen();
        if drained(gate) {
            return;
        }
        listener.wait();
    }
}

/// An admission racing the close either gets a ticket that the drain then waits for, or is
/// rejected; never both, never neither, and the count returns to zero.
#[test]
fn admission_races_close() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let g = Arc::clone(&gate);
        let requester = thread::spawn(move || match g.admit_normal() {
            Ok(ticket) => {
                drop(ticket);
                true
            }
            Err(_) => false,
        });
        let (in_flight_at_close, _) = close(&gate);
        let admitted = requester.join().unwrap();
        if !admitted {
            assert_eq!(
                in_flight_at_close, 0,
                "a rejected request was counted at close"
            );
        }
        assert!(gate.normal_drained());
        assert!(gate.admit_normal().is_err());
    });
}

/// A request admitted before close releasing while a second admission races the close:
/// whatever the interleaving, the second admission succeeds exactly when it came before the
/// close (close counts it in flight), is refused with `NotAccepting` otherwise, and the
/// group drains to zero and stays closed.
#[test]
fn concurrent_releases_after_close() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let g1 = Arc::clone(&gate);
        let g2 = Arc::clone(&gate);
        let (tx1, rx1) = channel();
        let (tx2, rx2) = channel();
        let (tx3, rx3) = channel::<()>();
        let t1 = thread::spawn(move || {
            let t = g1.admit_normal().unwrap();
            tx1.send(()).unwrap();
            rx2.recv().unwrap();
            drop(t);
        });
        let t2 = thread::spawn(move || {
            let t = g2.admit_normal();
            let admitted = t.as_ref().map(|_| ()).map_err(|r| *r);
            // Hold an admitted ticket until the close has been counted.
            rx3.recv().unwrap();
            drop(t);
            admitted
        });
        rx1.recv().unwrap();
        let (normal, long_running) = close(&gate);
        tx2.send(()).unwrap();
        tx3.send(()).unwrap();
        t1.join().unwrap();
        let admitted = t2.join().unwrap();
        match admitted {
            Ok(()) => assert_eq!((normal, long_running), (2, 0)),
            Err(r) => {
                assert_eq!(r, Rejection::NotAccepting);
                assert_eq!((normal, long_running), (1, 0));
            }
        }
        assert!(gate.normal_drained());
        assert_eq!(gate.normal_in_flight(), 0);
        assert!(gate.admit_normal().is_err());
    });
}

/// Two tickets admitted before close, released concurrently on two threads after it: the
/// last releaser observes the drained group (its own release is the last change to the
/// word), a listener registered after close is notified, and nothing is left in flight.
#[test]
fn two_releases_after_close_last_one_sees_drained() {
    loom::model(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::SendRetryAfter));
        let (ready_tx, ready_rx) = channel();
        let mut go = Vec::new();
        let mut releasers = Vec::new();
        for _ in 0..2 {
            let g = Arc::clone(&gate);
            let ready = ready_tx.clone();
            let (go_tx, go_rx) = channel::<()>();
            go.push(go_tx);
            releasers.push(thread::spawn(move || {
                let ticket = g.admit_normal().unwrap();
                ready.send(()).unwrap();
                go_rx.recv().unwrap();
                drop(ticket);
                g.normal_drained()
            }));
        }
        ready_rx.recv().unwrap();
        ready_rx.recv().unwrap();
        assert_eq!(close(&gate), (2, 0));
        assert_eq!(gate.admit_normal().unwrap_err(), Rejection::RetryAfter);
        let mut listener = gate.listen();
        assert!(!is_notified(&mut listener));
        for tx in go {
            tx.send(()).unwrap();
        }
        let saw_drained: Vec<bool> = releasers.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(
            saw_drained.contains(&true),
            "neither releaser observed the drained group: {saw_drained:?}"
        );
        assert!(
            is_notified(&mut listener),
            "the last release did not notify"
        );
        assert_eq!(gate.normal_in_flight(), 0);
        assert!(gate.normal_drained());
    });
}

/// A drain waiter never misses the wake-up, even when the last real release races a
/// rejected admission's back-out (which transiently holds the count above zero, so the
/// release itself sees a non-zero count and it is the back-out that must notify).
#[test]
fn drain_waiter_is_woken_when_a_backout_races_the_last_release() {
    model_bounded(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let (ready_tx, ready_rx) = channel();
        let (go_tx, go_rx) = channel::<()>();
        let g = Arc::clone(&gate);
        let releaser = thread::spawn(move || {
            let ticket = g.admit_normal().unwrap();
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop(ticket);
        });
        ready_rx.recv().unwrap();
        assert_eq!(close(&gate), (1, 0));
        let g = Arc::clone(&gate);
        let late = thread::spawn(move || {
            assert_eq!(g.admit_normal().unwrap_err(), Rejection::NotAccepting);
        });
        go_tx.send(()).unwrap();
        wait_until(&gate, Gate::normal_drained);
        releaser.join().unwrap();
        late.join().unwrap();
        assert_eq!(gate.normal_in_flight(), 0);
    });
}

/// The same race while the *other* group still has a request in flight (held until the
/// wait is over): the back-out must notify for its own group's drain alone, whatever the other
/// group's count. `long_running` says which group races; the other one holds a ticket.
fn backout_races_last_release_while_other_group_busy(long_running: bool) {
    model_bounded(move || {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let (ready_tx, ready_rx) = channel();
        let (go_tx, go_rx) = channel::<()>();
        let admit = move |g: &Gate| {
            if long_running {
                g.admit_long_running().map(drop)
            } else {
                g.admit_normal().map(drop)
            }
        };
        // The other group's request, in flight until the end.
        let other_normal = long_running.then(|| gate.admit_normal().unwrap());
        let other_long = (!long_running).then(|| gate.admit_long_running().unwrap());
        let g = Arc::clone(&gate);
        let releaser = thread::spawn(move || {
            let normal = (!long_running).then(|| g.admit_normal().unwrap());
            let long = long_running.then(|| g.admit_long_running().unwrap());
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop((normal, long));
        });
        ready_rx.recv().unwrap();
        assert_eq!(close(&gate), (1, 1));
        let g = Arc::clone(&gate);
        let late = thread::spawn(move || {
            assert_eq!(admit(&g).unwrap_err(), Rejection::NotAccepting);
        });
        go_tx.send(()).unwrap();
        if long_running {
            wait_until(&gate, Gate::long_running_drained);
        } else {
            wait_until(&gate, Gate::normal_drained);
        }
        releaser.join().unwrap();
        late.join().unwrap();
        drop((other_normal, other_long));
    });
}

/// A normal back-out racing the last normal release, a long-running request in flight.
#[test]
fn drain_waiter_is_woken_when_a_normal_backout_races_while_long_running_busy() {
    backout_races_last_release_while_other_group_busy(false);
}

/// A long-running back-out racing the last long-running release, a normal request in flight.
#[test]
fn drain_waiter_is_woken_when_a_long_running_backout_races_while_normal_busy() {
    backout_races_last_release_while_other_group_busy(true);
}

/// A waiter on one thread, two concurrent releases after close on others: the waiter
/// always wakes.
#[test]
fn drain_waiter_is_woken_by_concurrent_releases() {
    model_bounded(|| {
        let gate = Arc::new(Gate::new(ShutdownMode::CloseListener));
        let (ready_tx, ready_rx) = channel();
        let mut go = Vec::new();
        let mut releasers = Vec::new();
        for _ in 0..2 {
            let g = Arc::clone(&gate);
            let ready = ready_tx.clone();
            let (go_tx, go_rx) = channel::<()>();
            go.push(go_tx);
            releasers.push(thread::spawn(move || {
                let ticket = g.admit_long_running().unwrap();
                ready.send(()).unwrap();
                go_rx.recv().unwrap();
                drop(ticket);
            }));
        }
        ready_rx.recv().unwrap();
        ready_rx.recv().unwrap();
        assert_eq!(close(&gate), (0, 2));
        for tx in go {
            tx.send(()).unwrap();
        }
        wait_until(&gate, Gate::long_running_drained);
        for t in releasers {
            t.join().unwrap();
        }
        assert_eq!(gate.long_running_in_flight(), 0);
    });
}

/// A long-running handler that sees `NotAcceptingNewRequest` and ends its stream at once
/// must find the drain's pacing already in place, in every interleaving (the machine closes
/// the gate and starts pacing before it publishes the signal).
#[test]
fn pacing_is_in_place_before_not_accepting_is_visible() {
    use lameduck::sim::Simulator;
    use lameduck::{Admission, Config, LifecycleSignal, RequestClass};
    use std::time::Duration;

    loom::model(|| {
        let config = Config::builder()
            .shutdown_watch_termination_grace_period(Duration::from_secs(10))
            .build()
            .unwrap();
        let mut sim = Simulator::serving(config, |_| {}).unwrap();
        let shared = sim.shared().unwrap();
        let first = match shared.admit(RequestClass::LongRunning) {
            Admission::LongRunning(t) => t,
            _ => panic!("admitted before the stop"),
        };
        let second = match shared.admit(RequestClass::LongRunning) {
            Admission::LongRunning(t) => t,
            _ => panic!("admitted before the stop"),
        };
        let turns = |a: &lameduck::shared::OwnedLongRunningTicket,
                     b: &lameduck::shared::OwnedLongRunningTicket| {
            let now = lameduck::Instant::ZERO;
            (a.reserve_turn(now), b.reserve_turn(now))
        };
        let observer = {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut spins = 0;
                while !shared.has_fired(LifecycleSignal::NotAcceptingNewRequest) {
                    spins += 1;
                    if spins > 3 {
                        // Gave up: the main thread ends the streams once the stop returned.
                        return Err((first, second));
                    }
                    thread::yield_now();
                }
                Ok(turns(&first, &second))
            })
        };
        sim.stop().unwrap();
        // Burst 1: the first end goes at once, the second must be paced; checked on every
        // interleaving, by the observer when it saw the signal, here otherwise.
        let (a, b) = match observer.join().unwrap() {
            Ok(ab) => ab,
            Err((first, second)) => turns(&first, &second),
        };
        assert_eq!(a, None);
        assert!(b.is_some(), "a stream ended unpaced after the signal");
    });
}
