//! The drains: long-running requests paced at `max(count/grace, min_qps)` within the grace
//! period, an empty drain ending at once, and the normal drain bounded by the request timeout.

mod common;

use std::collections::BTreeMap;

use common::{ms, secs, Sim};
use lameduck::{Admission, Config, Event, Instant, LifecycleSignal, RequestClass};

/// Opens `n` long-running requests, terminates, and ends every stream as soon as it is
/// signalled, holding each ticket until its paced turn. Returns the completion instants
/// relative to `NotAcceptingNewRequest`, and the sim.
fn paced_drain(n: usize, grace: std::time::Duration) -> (Vec<std::time::Duration>, Sim) {
    let cfg = Config::builder()
        .shutdown_watch_termination_grace_period(grace)
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    let shared = sim.shared();
    let tickets: Vec<_> = (0..n)
        .map(|_| match shared.admit(RequestClass::LongRunning) {
            Admission::LongRunning(t) => t,
            other => panic!("not admitted: {other:?}"),
        })
        .collect();
    assert_eq!(shared.gate().long_running_in_flight(), n);
    sim.stop();
    let n_at = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap();
    // Every handler ends its stream at once; the adapter holds each end until its turn.
    let mut releases: BTreeMap<Instant, Vec<_>> = BTreeMap::new();
    for t in tickets {
        let at = t.reserve_turn(sim.now).unwrap_or(sim.now);
        releases.entry(at).or_default().push(t);
    }
    let mut done = Vec::new();
    for (at, batch) in releases {
        sim.advance_to(at);
        for t in batch {
            drop(t);
            done.push(at - n_at);
        }
        sim.input(lameduck::Input::DrainProgress);
    }
    (done, sim)
}

#[test]
fn two_hundred_long_running_requests_drain_at_the_floor_rate_within_the_grace_period() {
    let grace = secs(2);
    let (done, sim) = paced_drain(200, grace);
    // 200 / 2 s = 100/s is below the floor of 200/s: one completion every 5 ms, burst 1.
    assert_eq!(done.len(), 200);
    assert_eq!(done[0], ms(0));
    assert_eq!(done[1], ms(5));
    assert_eq!(*done.last().unwrap(), ms(995));
    for w in done.windows(2) {
        assert_eq!(w[1] - w[0], ms(5));
    }
    let n_at = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap();
    let drained = sim
        .fired_at(LifecycleSignal::InFlightRequestsDrained)
        .unwrap();
    assert!(drained - n_at <= grace);
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::LongRunningDrainFinished {
            before: 200,
            after: 0,
            timed_out: false,
            skipped: false
        }
    )));
    assert_eq!(sim.exit, Some(0));
    sim.check();
}

#[test]
fn many_long_running_requests_drain_at_count_over_grace() {
    // 4,000 over 5 s = 800/s, above the floor: one every 1.25 ms, all within the grace.
    let (done, sim) = paced_drain(4000, secs(5));
    assert_eq!(done.len(), 4000);
    assert_eq!(done[1] - done[0], std::time::Duration::from_micros(1250));
    assert!(*done.last().unwrap() < secs(5));
    assert_eq!(sim.exit, Some(0));
}

#[test]
fn the_long_running_drain_gives_up_at_the_grace_deadline() {
    let cfg = Config::builder()
        .shutdown_watch_termination_grace_period(secs(3))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    let shared = sim.shared();
    let _stuck = shared.admit(RequestClass::LongRunning);
    sim.stop();
    let n_at = sim.now;
    assert_eq!(sim.run_to_exit(20), Some(0));
    assert_eq!(
        sim.fired_at(LifecycleSignal::InFlightRequestsDrained),
        Some(n_at + secs(3))
    );
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::LongRunningDrainFinished {
            before: 1,
            after: 1,
            timed_out: true,
            ..
        }
    )));
    sim.check();
}

#[test]
fn a_zero_grace_period_does_not_wait_for_long_running_requests() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    let shared = sim.shared();
    let _watch = shared.admit(RequestClass::LongRunning);
    sim.stop();
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::LongRunningDrainFinished {
            before: 1,
            after: 1,
            skipped: true,
            ..
        }
    )));
    assert_eq!(sim.exit, Some(0));
}

#[test]
fn a_drain_that_starts_at_zero_ends_at_once() {
    let cfg = Config::builder()
        .shutdown_delay(secs(1))
        .shutdown_watch_termination_grace_period(secs(30))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    sim.stop();
    sim.advance(secs(1));
    let n_at = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap();
    assert_eq!(
        sim.fired_at(LifecycleSignal::InFlightRequestsDrained),
        Some(n_at)
    );
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::LongRunningDrainFinished {
            before: 0,
            after: 0,
            timed_out: false,
            skipped: false
        }
    )));
    assert_eq!(sim.exit, Some(0));
}

#[test]
fn the_normal_drain_is_bounded_by_the_request_timeout() {
    let cfg = Config::builder().request_timeout(secs(10)).build().unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    let shared = sim.shared();
    // A handler that ignores its 504 deadline and never releases.
    let _stuck = shared.admit(RequestClass::Normal);
    sim.stop();
    let n_at = sim.now;
    assert_eq!(sim.run_to_exit(50), Some(0));
    let drained = sim
        .fired_at(LifecycleSignal::InFlightRequestsDrained)
        .unwrap();
    assert_eq!(drained - n_at, secs(10));
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::NormalDrainFinished {
            remaining: 1,
            timed_out: true
        }
    )));
}

#[test]
fn drain_progress_is_reported_about_once_a_second() {
    let cfg = Config::builder().request_timeout(secs(5)).build().unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    let shared = sim.shared();
    let req = shared.admit(RequestClass::Normal);
    sim.stop();
    sim.advance(ms(3500));
    let reports = sim.count(|e| {
        matches!(
            e,
            Event::DrainProgress {
                normal_in_flight: 1,
                ..
            }
        )
    });
    assert_eq!(reports, 3);
    drop(req);
    sim.input(lameduck::Input::DrainProgress);
    assert_eq!(sim.exit, Some(0));
    sim.advance(secs(5));
    assert_eq!(sim.count(|e| matches!(e, Event::DrainProgress { .. })), 3);
}

#[test]
fn add_after_wait_is_rejected() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    let shared = sim.shared();
    sim.auto_stop_listeners = false;
    sim.stop();
    assert!(matches!(
        shared.admit(RequestClass::Normal),
        Admission::Rejected(lameduck::gate::Rejection::NotAccepting)
    ));
    assert!(matches!(
        shared.admit(RequestClass::LongRunning),
        Admission::Rejected(lameduck::gate::Rejection::NotAccepting)
    ));
    assert!(matches!(
        shared.admit(RequestClass::Exempt),
        Admission::Exempt(None)
    ));
}

#[test]
fn pacing_is_in_place_when_not_accepting_new_request_is_published() {
    // A long-running handler woken by the signal ends its stream at once; it must already
    // find its paced turn. (The cross-thread race itself is model-checked in tests/loom.rs.)
    let cfg = Config::builder()
        .shutdown_watch_termination_grace_period(secs(10))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    let shared = sim.shared();
    let tickets: Vec<_> = (0..3)
        .map(|_| match shared.admit(RequestClass::LongRunning) {
            Admission::LongRunning(t) => t,
            other => panic!("not admitted: {other:?}"),
        })
        .collect();
    sim.stop();
    assert!(shared.has_fired(LifecycleSignal::NotAcceptingNewRequest));
    let now = sim.now;
    let turns: Vec<_> = tickets.iter().map(|t| t.reserve_turn(now)).collect();
    assert_eq!(turns, [None, Some(now + ms(5)), Some(now + ms(10))]);
}
