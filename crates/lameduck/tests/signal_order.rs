//! The order of signals in close-listener and retry-after modes, and `NotAcceptingNewRequest`
//! waiting for both the delay and the pre-shutdown hooks.

mod common;

use common::{ms, secs, Sim};
use lameduck::machine::{HookKind, HookOutcome};
use lameduck::{Config, Event, Input, Instant, LifecycleSignal, Phase};
use LifecycleSignal::*;

fn config(retry_after_mode: bool) -> Config {
    Config::builder()
        .shutdown_delay(secs(2))
        .shutdown_send_retry_after(retry_after_mode)
        .shutdown_watch_termination_grace_period(secs(2))
        .build()
        .unwrap()
}

#[test]
fn close_listener_mode_closes_the_listener_at_not_accepting_and_exits_0_after_the_drain() {
    let mut sim = Sim::serving(config(false), |_| {});
    sim.auto_stop_listeners = false;
    let shared = sim.shared();
    let in_flight = shared.admit(lameduck::RequestClass::Normal);
    assert_eq!(sim.machine.phase(), Phase::Serving);

    sim.advance(secs(1));
    sim.stop();
    let t0 = sim.now;
    assert_eq!(sim.machine.phase(), Phase::LameDuck);
    assert_eq!(sim.fired_at(ShutdownInitiated), Some(t0));
    // Pre-shutdown hooks (none) are done at once; the delay holds the rest back.
    assert_eq!(
        sim.signals(),
        [
            MuxAndDiscoveryComplete,
            ShutdownInitiated,
            PreShutdownHooksStopped
        ]
    );

    sim.advance(secs(2));
    assert_eq!(sim.fired_at(AfterShutdownDelayDuration), Some(t0 + secs(2)));
    assert_eq!(sim.fired_at(NotAcceptingNewRequest), Some(t0 + secs(2)));
    // Close-listener mode: StopListening right at NotAcceptingNewRequest, HTTP shutdown timeout
    // = request_timeout.
    let stop = sim
        .log
        .iter()
        .find_map(|(at, e)| match e {
            Event::StopListening { shutdown_deadline } => Some((*at, *shutdown_deadline)),
            _ => None,
        })
        .expect("listener stopped in close-listener mode");
    assert_eq!(stop, (t0 + secs(2), Some(t0 + secs(2) + secs(60))));

    let api = sim.listeners[0];
    sim.input(Input::ListenerStopped(api));
    assert!(sim.machine.has_fired(HTTPServerStoppedListening));
    assert!(
        !sim.machine.has_fired(InFlightRequestsDrained),
        "a request is in flight"
    );

    sim.advance(ms(300));
    drop(in_flight);
    sim.input(Input::DrainProgress);
    sim.input(Input::ServerStopped(api));
    assert_eq!(sim.exit, Some(0));
    assert_eq!(
        sim.signals(),
        [
            MuxAndDiscoveryComplete,
            ShutdownInitiated,
            PreShutdownHooksStopped,
            AfterShutdownDelayDuration,
            NotAcceptingNewRequest,
            HTTPServerStoppedListening,
            InFlightRequestsDrained,
        ]
    );
    assert_eq!(sim.machine.phase(), Phase::Exited);
    sim.check();
}

#[test]
fn retry_after_mode_keeps_listening_until_drained_and_uses_a_2s_shutdown_timeout() {
    let mut sim = Sim::serving(config(true), |_| {});
    let shared = sim.shared();
    let in_flight = shared.admit(lameduck::RequestClass::Normal);
    sim.stop();
    sim.advance(secs(2));
    assert!(sim.machine.has_fired(NotAcceptingNewRequest));
    assert_eq!(sim.count(|e| matches!(e, Event::StopListening { .. })), 0);
    // New requests get 429.
    assert!(matches!(
        shared.admit(lameduck::RequestClass::Normal),
        lameduck::Admission::Rejected(lameduck::gate::Rejection::RetryAfter)
    ));
    sim.advance(secs(1));
    drop(in_flight);
    sim.input(Input::DrainProgress);
    let drained_at = sim.fired_at(InFlightRequestsDrained).unwrap();
    assert!(sim.log.iter().any(|(at, e)| *at == drained_at
        && *e
            == Event::StopListening {
                shutdown_deadline: Some(drained_at + secs(2))
            }));
    assert_eq!(sim.exit, Some(0));
    let order = sim.signals();
    let pos = |s| order.iter().position(|x| *x == s).unwrap();
    assert!(pos(InFlightRequestsDrained) < pos(HTTPServerStoppedListening));
    sim.check();
}

#[test]
fn not_accepting_waits_for_both_the_delay_and_a_slow_hook() {
    let mut hook = None;
    let mut sim = Sim::serving(config(false), |m| {
        hook = Some(m.add_hook(HookKind::PreShutdown, "slow").unwrap());
    });
    let hook = hook.unwrap();
    sim.stop();
    let t0 = sim.now;
    assert_eq!(sim.count(|e| *e == Event::RunPreShutdownHooks), 1);
    sim.advance(secs(5));
    assert_eq!(sim.fired_at(AfterShutdownDelayDuration), Some(t0 + secs(2)));
    assert!(!sim.machine.has_fired(PreShutdownHooksStopped));
    assert!(
        !sim.machine.has_fired(NotAcceptingNewRequest),
        "the hook holds it back"
    );
    sim.finish_hook(hook, HookOutcome::Succeeded);
    assert_eq!(sim.fired_at(PreShutdownHooksStopped), Some(t0 + secs(5)));
    assert_eq!(sim.fired_at(NotAcceptingNewRequest), Some(t0 + secs(5)));
    assert_eq!(sim.run_to_exit(10), Some(0));
    sim.check();
}

#[test]
fn zero_delay_waits_only_for_hooks() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    sim.stop();
    assert!(sim.machine.has_fired(NotAcceptingNewRequest));
    assert_eq!(sim.exit, Some(0));
    assert_eq!(sim.now, Instant::ZERO);
    sim.check();
}

#[test]
fn second_signal_exits_1_at_once_but_repeated_api_requests_do_not() {
    for first in [
        lameduck::machine::StopSource::Api,
        lameduck::machine::StopSource::OsSignal,
    ] {
        let mut sim = Sim::serving(config(false), |m| {
            m.add_hook(lameduck::machine::HookKind::Destroy, "flush")
                .unwrap();
        });
        sim.input(Input::StopRequested(first));
        sim.input(Input::StopRequested(lameduck::machine::StopSource::Api));
        assert_eq!(
            sim.exit, None,
            "{first:?}: a repeated request_shutdown() changes nothing"
        );
        sim.input(Input::StopRequested(
            lameduck::machine::StopSource::OsSignal,
        ));
        assert_eq!(
            sim.exit,
            Some(1),
            "{first:?}: an OS signal after the first stop event exits at once"
        );
        let tail: Vec<_> = sim.log.iter().rev().take(1).map(|(_, e)| *e).collect();
        assert_eq!(
            tail,
            [Event::Exit {
                code: 1,
                reason: lameduck::machine::ExitReason::SecondSignal
            }]
        );
        assert_eq!(
            sim.count(|e| *e == Event::RunDestroyHooks),
            0,
            "no hooks on the second stop event"
        );
        assert!(sim.machine.poll_timeout().is_none());
        sim.check();
    }
}

#[test]
fn mux_and_discovery_complete_waits_for_every_registered_signal_and_never_fires_after_stop() {
    let mut ids = Vec::new();
    let mut sim = Sim::serving(Config::default(), |m| {
        ids.push(m.add_routes_ready("crds").unwrap());
        ids.push(m.add_routes_ready("apis").unwrap());
    });
    assert!(!sim.machine.has_fired(MuxAndDiscoveryComplete));
    sim.input(Input::RoutesReady(ids[0]));
    sim.input(Input::RoutesReady(ids[0]));
    assert!(!sim.machine.has_fired(MuxAndDiscoveryComplete));
    sim.input(Input::RoutesReady(ids[1]));
    assert!(sim.machine.has_fired(MuxAndDiscoveryComplete));

    let mut ids = Vec::new();
    let mut sim = Sim::serving(config(false), |m| {
        ids.push(m.add_routes_ready("crds").unwrap())
    });
    sim.stop();
    sim.input(Input::RoutesReady(ids[0]));
    assert!(!sim.machine.has_fired(MuxAndDiscoveryComplete));
    sim.run_to_exit(20);
    sim.check();
}

#[test]
fn several_listeners_one_lifecycle() {
    let mut admin = None;
    let mut sim = Sim::serving(Config::default(), |m| {
        admin = Some(m.add_listener("admin").unwrap());
    });
    let admin = admin.unwrap();
    // Not serving until every listener serves.
    assert_eq!(sim.machine.phase(), Phase::Starting);
    assert_eq!(sim.count(|e| *e == Event::NotifyReady), 0);
    sim.input(Input::ListenerServing(admin));
    assert_eq!(sim.count(|e| *e == Event::NotifyReady), 1);
    sim.auto_stop_listeners = false;
    sim.stop();
    let api = sim.listeners[0];
    sim.input(Input::ListenerStopped(api));
    sim.input(Input::ServerStopped(api));
    assert!(!sim.machine.has_fired(HTTPServerStoppedListening));
    sim.input(Input::ListenerStopped(admin));
    assert!(sim.machine.has_fired(HTTPServerStoppedListening));
    assert_eq!(sim.exit, None, "the admin server is still finishing");
    sim.input(Input::ServerStopped(admin));
    assert_eq!(sim.exit, Some(0));
    sim.check();
}

#[test]
fn http_shutdown_timeout_stops_waiting_and_closes_nothing() {
    let mut sim = Sim::serving(
        Config::builder().request_timeout(secs(3)).build().unwrap(),
        |_| {},
    );
    sim.auto_stop_listeners = false;
    sim.stop();
    let api = sim.listeners[0];
    sim.input(Input::ListenerStopped(api));
    // The server never reports stopped (an idle keep-alive client holds it).
    assert_eq!(sim.run_to_exit(10), Some(0));
    assert_eq!(sim.count(|e| *e == Event::HttpShutdownTimedOut), 1);
    // The drain ended at once; the exit waits for the server until the timeout, then for
    // nothing more: the linger after the drain is over by then.
    assert_eq!(sim.now, Instant::ZERO + secs(3));
    sim.check();
}

#[test]
fn systemd_notifications_are_emitted_once_each() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    sim.stop();
    assert_eq!(sim.count(|e| *e == Event::NotifyReady), 1);
    assert_eq!(sim.count(|e| *e == Event::NotifyStopping), 1);
    let ready = sim
        .log
        .iter()
        .position(|(_, e)| *e == Event::NotifyReady)
        .unwrap();
    let stopping = sim
        .log
        .iter()
        .position(|(_, e)| *e == Event::NotifyStopping)
        .unwrap();
    assert!(ready < stopping);
}
