//! The termination bounds, as kube-apiserver's: the request timeout bounds a normal request's
//! whole life, the grace period bounds long-running requests (even past the request
//! timeout), the HTTP shutdown timeout closes nothing, exempt requests admitted before the
//! gate closes are drained, and a second stop event exits at once.

mod common;

use std::time::Duration;

use common::{secs, Sim};
use lameduck::machine::{ExitReason, HookKind, HookOutcome, StopSource};
use lameduck::machine::{CONNECTION_CLOSE_LINGER, DESTROY_HOOKS_TIMEOUT};
use lameduck::{Admission, Config, Event, Input, LifecycleSignal, RequestClass};

fn millis(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn long_running_requests_outlive_the_request_timeout() {
    let cfg = Config::builder()
        .request_timeout(secs(1))
        .shutdown_watch_termination_grace_period(secs(10))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    sim.auto_stop_listeners = false;
    for _ in 0..800 {
        assert!(sim.open_request(RequestClass::LongRunning));
    }
    sim.stop();
    let api = sim.listeners[0];
    sim.input(Input::ListenerStopped(api));
    // Past the request timeout (and so the HTTP shutdown timeout): nothing is cut, the
    // streams are all still in flight, and the machine only stopped waiting for the server.
    sim.advance(millis(1500));
    assert_eq!(sim.count(|e| *e == Event::HttpShutdownTimedOut), 1);
    assert_eq!(sim.shared().gate().long_running_in_flight(), 800);
    assert!(!sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    // The handlers end their streams (here all at N + 1.5 s); the ends are paced at
    // max(800 / 10 s, 200/s) = 200/s, so the last one ends about 4 s later.
    for _ in 0..800 {
        sim.end_request(0);
    }
    sim.advance(secs(2));
    assert!(!sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    for _ in 0..10_000 {
        if sim
            .machine
            .has_fired(LifecycleSignal::InFlightRequestsDrained)
        {
            break;
        }
        sim.advance(millis(1));
    }
    let drained = sim
        .fired_at(LifecycleSignal::InFlightRequestsDrained)
        .unwrap();
    let n = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap();
    assert!(
        drained - n >= millis(3900) && drained - n < secs(10),
        "{:?}",
        drained - n
    );
    assert!(sim.log.iter().any(|(_, e)| matches!(
        e,
        Event::LongRunningDrainFinished {
            before: 800,
            after: 0,
            timed_out: false,
            ..
        }
    )));
    // The server still has connections (the last stream's final bytes): the exit waits a
    // short linger for them to close, then goes.
    assert_eq!(sim.exit, None);
    sim.input(Input::ServerStopped(api));
    assert_eq!(sim.exit, Some(0));
    assert_eq!(
        sim.now, drained,
        "the server stopping ends the linger at once"
    );
    sim.check();
}

#[test]
fn the_close_linger_is_short_and_never_extends_past_the_longer_drain() {
    for (end_streams_after, expect_exit_after_n) in [
        // Drained at N + 2 s: linger 250 ms.
        (secs(2), secs(2) + CONNECTION_CLOSE_LINGER),
        // Drained at N + 9.9 s: the linger is cut at N + grace (10 s).
        (millis(9900), secs(10)),
    ] {
        let cfg = Config::builder()
            .request_timeout(secs(1))
            .shutdown_watch_termination_grace_period(secs(10))
            .build()
            .unwrap();
        let mut sim = Sim::serving(cfg, |_| {});
        sim.auto_stop_listeners = false;
        assert!(sim.open_request(RequestClass::LongRunning));
        sim.stop();
        let api = sim.listeners[0];
        sim.input(Input::ListenerStopped(api));
        let n = sim
            .fired_at(LifecycleSignal::NotAcceptingNewRequest)
            .unwrap();
        sim.advance_to(n + end_streams_after);
        sim.end_request(0);
        // The server never reports stopped (a connection its client keeps open).
        assert_eq!(sim.run_to_exit(20), Some(0));
        assert_eq!(sim.now - n, expect_exit_after_n);
        sim.check();
    }
}

#[test]
fn the_normal_drain_ends_at_the_request_timeout_exactly() {
    let cfg = Config::builder().request_timeout(secs(2)).build().unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    // A request whose adapter never releases it (a broken adapter): the drain still ends.
    let _stuck = sim.shared().admit(RequestClass::Normal);
    sim.stop();
    assert_eq!(sim.run_to_exit(20), Some(0));
    let n = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .unwrap();
    assert_eq!(
        sim.fired_at(LifecycleSignal::InFlightRequestsDrained)
            .unwrap()
            - n,
        secs(2)
    );
    sim.check();
}

#[test]
fn exempt_requests_admitted_before_the_gate_closes_are_drained() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    let shared = sim.shared();
    let Admission::Exempt(Some(scrape)) = shared.admit(RequestClass::Exempt) else {
        panic!("an exempt request is tracked while the gate is open");
    };
    sim.stop();
    assert_eq!(shared.gate().normal_in_flight(), 1);
    assert!(!sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    // After the gate closed: still served, never rejected, untracked.
    assert!(matches!(
        shared.admit(RequestClass::Exempt),
        Admission::Exempt(None)
    ));
    drop(scrape);
    sim.input(Input::DrainProgress);
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    assert_eq!(sim.exit, Some(0));
    sim.check();
}

#[test]
fn a_second_signal_exits_at_once_from_every_phase() {
    // (what runs when the second signal arrives)
    for phase in ["lame duck", "pre-shutdown hook", "drain", "destroy hook"] {
        let (mut pre, mut destroy) = (None, None);
        let cfg = Config::builder()
            .shutdown_delay(secs(if phase == "lame duck" { 5 } else { 0 }))
            .build()
            .unwrap();
        let mut sim = Sim::serving(cfg, |m| {
            if phase == "pre-shutdown hook" {
                pre = Some(m.add_hook(HookKind::PreShutdown, "slow").unwrap());
            }
            if phase == "destroy hook" {
                destroy = Some(m.add_hook(HookKind::Destroy, "slow").unwrap());
            }
        });
        let _held = (phase == "drain").then(|| sim.shared().admit(RequestClass::Normal));
        sim.stop();
        sim.advance(millis(10));
        assert_eq!(sim.exit, None, "{phase}: still terminating");
        if phase == "destroy hook" {
            assert_eq!(sim.count(|e| *e == Event::RunDestroyHooks), 1);
        }
        let before = sim.log.len();
        sim.stop();
        assert_eq!(sim.exit, Some(1), "{phase}");
        let after: Vec<_> = sim.log[before..].iter().map(|(_, e)| *e).collect();
        assert_eq!(
            after,
            [Event::Exit {
                code: 1,
                reason: ExitReason::SecondSignal
            }],
            "{phase}: the exit is the only thing that happens"
        );
        let _ = (pre, destroy);
        sim.check();
    }
}

#[test]
fn request_shutdown_counts_as_the_first_stop_event() {
    let cfg = Config::builder().shutdown_delay(secs(5)).build().unwrap();
    let mut sim = Sim::serving(cfg.clone(), |_| {});
    sim.input(Input::StopRequested(StopSource::Api));
    sim.input(Input::StopRequested(StopSource::Api));
    assert_eq!(
        sim.exit, None,
        "repeating request_shutdown() changes nothing"
    );
    sim.input(Input::StopRequested(StopSource::OsSignal));
    assert_eq!(
        sim.exit,
        Some(1),
        "a signal after request_shutdown() is the second event"
    );

    // An internal trigger (a failed post-start hook) is not a stop event.
    let mut hook = None;
    let mut sim = Sim::serving(cfg, |m| {
        hook = Some(m.add_hook(HookKind::PostStart, "warm-up").unwrap());
    });
    sim.finish_hook(hook.unwrap(), HookOutcome::Failed);
    assert!(sim.machine.has_fired(LifecycleSignal::ShutdownInitiated));
    sim.stop();
    assert_eq!(sim.exit, None);
    assert_eq!(sim.run_to_exit(20), Some(1));
    sim.check();
}

#[test]
fn destroy_hooks_get_a_bounded_time() {
    let mut sim = Sim::serving(Config::default(), |m| {
        m.add_hook(HookKind::Destroy, "hangs").unwrap();
    });
    sim.stop();
    let started = sim.now;
    assert_eq!(sim.count(|e| *e == Event::RunDestroyHooks), 1);
    assert_eq!(sim.exit, None);
    assert_eq!(sim.run_to_exit(10), Some(0));
    assert_eq!(sim.now - started, DESTROY_HOOKS_TIMEOUT);
    sim.check();
}

#[test]
fn connections_cut_by_the_runtime_make_the_exit_code_1() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    let api = sim.listeners[0];
    sim.auto_stop_listeners = false;
    sim.stop();
    sim.input(Input::ListenerStopped(api));
    sim.input(Input::ConnectionsCut(api));
    assert!(sim
        .log
        .iter()
        .any(|(_, e)| *e == Event::ConnectionsCut(api)));
    sim.input(Input::ServerStopped(api));
    assert_eq!(sim.exit, Some(1));
    assert!(sim.log.iter().any(|(_, e)| *e
        == Event::Exit {
            code: 1,
            reason: ExitReason::Failure
        }));
    sim.check();
}

#[test]
fn retry_after_mode_waits_two_seconds_for_the_servers_after_the_drain() {
    let cfg = Config::builder()
        .shutdown_send_retry_after(true)
        .request_timeout(secs(30))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |_| {});
    sim.auto_stop_listeners = false;
    sim.stop();
    let api = sim.listeners[0];
    let drained = sim
        .fired_at(LifecycleSignal::InFlightRequestsDrained)
        .unwrap();
    sim.input(Input::ListenerStopped(api));
    assert_eq!(sim.run_to_exit(20), Some(0));
    assert_eq!(sim.now - drained, secs(2));
    assert_eq!(sim.count(|e| *e == Event::HttpShutdownTimedOut), 1);
    sim.check();
}
