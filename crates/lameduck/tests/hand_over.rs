//! The hand-over of the listening sockets to a successor process: one more trigger of the
//! termination DAG, refused when it cannot apply, harmless when it fails, and visible in the
//! trace the reference model checks.

mod common;

use std::time::Duration;

use common::{secs, Sim};
use lameduck::machine::{HandOverOutcome, HookKind, HookOutcome, InputError, StopSource};
use lameduck::sim::Simulator;
use lameduck::summary::{StopCause, TerminationSummary};
use lameduck::trace::log::parse_log;
use lameduck::trace::{check_trace, Rule, TraceEvent, TracedEvent};
use lameduck::{Config, Event, Input, Instant, LifecycleSignal, Phase};

fn config() -> Config {
    Config::builder()
        .shutdown_delay(secs(2))
        .build()
        .expect("valid")
}

#[test]
fn a_ready_successor_starts_the_same_termination_as_sigterm() {
    let mut sim = Sim::serving(config(), |_| {});
    sim.input(Input::HandOverRequested);
    assert_eq!(sim.count(|e| *e == Event::HandOverListeners), 1);
    // The sockets are on their way: this process keeps serving.
    sim.advance(secs(1));
    assert_eq!(sim.machine.phase(), Phase::Serving);
    assert!(!sim.machine.has_fired(LifecycleSignal::ShutdownInitiated));

    sim.input(Input::HandOverFinished(HandOverOutcome::SuccessorReady));
    let handed = sim.log.iter().position(|(_, e)| *e == Event::HandedOver);
    let initiated = sim.log.iter().position(|(_, e)| {
        matches!(
            e,
            Event::Signal {
                signal: LifecycleSignal::ShutdownInitiated,
                ..
            }
        )
    });
    assert!(handed.is_some() && handed < initiated, "{:?}", sim.log);
    assert_eq!(sim.run_to_exit(100), Some(0));
    // The lame-duck window is kept: nothing stops accepting before the shutdown delay.
    let t0 = sim.fired_at(LifecycleSignal::ShutdownInitiated).unwrap();
    assert_eq!(
        sim.fired_at(LifecycleSignal::AfterShutdownDelayDuration),
        Some(t0 + secs(2))
    );
    let summary = sim.check();
    assert_eq!(summary.exit_code, Some(0));
    assert!(sim
        .trace()
        .iter()
        .any(|e| e.event == TraceEvent::HandedOver));

    let mut report = TerminationSummary::new();
    for (at, e) in &sim.log {
        report.observe(e, *at, None);
    }
    assert_eq!(
        report.record(Default::default(), Default::default()).cause,
        Some(StopCause::HandOver)
    );
}

#[test]
fn a_failed_hand_over_keeps_serving_and_may_be_retried() {
    let mut sim = Sim::serving(config(), |_| {});
    sim.input(Input::HandOverRequested);
    sim.input(Input::HandOverFinished(HandOverOutcome::Failed));
    assert_eq!(sim.count(|e| *e == Event::HandOverFailed), 1);
    assert_eq!(sim.machine.phase(), Phase::Serving);
    assert!(sim.machine.is_up());
    assert_eq!(sim.machine.poll_timeout(), None, "nothing scheduled");

    // A second attempt goes through; a SIGTERM afterwards is the second stop event.
    sim.input(Input::HandOverRequested);
    sim.input(Input::HandOverFinished(HandOverOutcome::SuccessorReady));
    sim.input(Input::StopRequested(StopSource::OsSignal));
    assert_eq!(sim.run_to_exit(100), Some(1));
    sim.check();
}

#[test]
fn a_hand_over_that_cannot_apply_is_a_typed_error_and_changes_nothing() {
    // Before every listener serves: it waits for them (a signal right after start).
    let mut sim = Simulator::serving(config(), |m| {
        m.add_listener("admin").unwrap();
    })
    .unwrap();
    sim.input(Input::HandOverRequested).unwrap();
    assert_eq!(sim.count(|e| *e == Event::HandOverListeners), 0);
    assert_eq!(
        sim.input(Input::HandOverRequested),
        Err(InputError::HandOverInProgress)
    );
    let admin = sim.listeners[1];
    sim.input(Input::ListenerServing(admin)).unwrap();
    assert_eq!(sim.count(|e| *e == Event::HandOverListeners), 1);
    sim.input(Input::HandOverFinished(HandOverOutcome::Failed))
        .unwrap();

    // Pending when termination starts: dropped.
    let mut sim = Simulator::serving(config(), |m| {
        m.add_listener("admin").unwrap();
    })
    .unwrap();
    sim.input(Input::HandOverRequested).unwrap();
    sim.stop().unwrap();
    let admin = sim.listeners[1];
    sim.input(Input::ListenerServing(admin)).unwrap();
    assert_eq!(sim.count(|e| *e == Event::HandOverListeners), 0);
    // A report with none under way.
    assert_eq!(
        sim.input(Input::HandOverFinished(HandOverOutcome::SuccessorReady)),
        Err(InputError::NoHandOver)
    );

    let mut sim = Simulator::serving(config(), |_| {}).unwrap();
    sim.input(Input::HandOverRequested).unwrap();
    assert_eq!(
        sim.input(Input::HandOverRequested),
        Err(InputError::HandOverInProgress)
    );
    assert_eq!(sim.count(|e| *e == Event::HandOverListeners), 1);

    // After termination started: refused; a successor ready meanwhile is not the cause.
    sim.stop().unwrap();
    sim.input(Input::HandOverFinished(HandOverOutcome::SuccessorReady))
        .unwrap();
    assert_eq!(sim.count(|e| *e == Event::HandedOver), 0);
    assert_eq!(
        sim.input(Input::HandOverRequested),
        Err(InputError::HandOverAfterStop)
    );
    assert_eq!(sim.run_to_exit(100), Some(0));
    sim.check_trace().unwrap();
}

#[test]
fn a_successor_is_up_only_after_its_post_start_hooks_succeed() {
    let mut sim = Sim::serving(config(), |m| {
        m.add_hook(HookKind::PostStart, "warm-cache").unwrap();
    });
    assert!(!sim.machine.is_up());
    let (hook, _) = sim.machine.hooks(HookKind::PostStart).next().unwrap();
    sim.finish_hook(hook, HookOutcome::Succeeded);
    assert!(sim.machine.is_up());

    let mut failing = Sim::serving(config(), |m| {
        m.add_hook(HookKind::PostStart, "warm-cache").unwrap();
    });
    let (hook, _) = failing.machine.hooks(HookKind::PostStart).next().unwrap();
    failing.finish_hook(hook, HookOutcome::Failed);
    assert!(!failing.machine.is_up());
}

#[test]
fn the_reference_model_places_the_hand_over_before_the_termination() {
    let cfg = Config::default();
    let at = |ms: u64| Some(Instant::ZERO + Duration::from_millis(ms));
    let ev = |event, ms| TracedEvent { event, at: at(ms) };
    let initiated = TraceEvent::Signal(LifecycleSignal::ShutdownInitiated);

    let legal = [ev(TraceEvent::HandedOver, 1), ev(initiated, 2)];
    assert!(check_trace(&cfg, &legal).is_ok());

    let late = [ev(initiated, 1), ev(TraceEvent::HandedOver, 2)];
    let v = check_trace(&cfg, &late).unwrap_err();
    assert_eq!((v.index, v.rule), (1, Rule::HandOverAfterShutdown));

    let twice = [ev(TraceEvent::HandedOver, 1), ev(TraceEvent::HandedOver, 2)];
    let v = check_trace(&cfg, &twice).unwrap_err();
    assert_eq!((v.index, v.rule), (1, Rule::HandOverOnce));
    assert_eq!(TraceEvent::HandedOver.to_string(), "HandedOver");
}

#[test]
fn the_hand_over_log_line_is_read_into_the_trace() {
    let log = "\
2026-11-23T10:00:00.000000Z  INFO lameduck_hyper::server: [graceful-termination] hand-over requested signal=SIGUSR2
2026-11-23T10:00:00.100000Z  INFO lameduck_hyper::server: [graceful-termination] listeners handed over to the successor
2026-11-23T10:00:00.100100Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=ShutdownInitiated
";
    let events = parse_log(log, None).unwrap();
    let kinds: Vec<_> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        kinds,
        [
            TraceEvent::HandedOver,
            TraceEvent::Signal(LifecycleSignal::ShutdownInitiated)
        ]
    );
    check_trace(&Config::default(), &events).unwrap();
}

#[test]
fn keep_alive_ends_at_shutdown_initiated_only_when_the_sockets_outlive_the_process() {
    // Alone on its sockets: keep-alive ends when new requests are no longer accepted.
    let mut alone = Sim::serving(config(), |_| {});
    alone.stop();
    assert!(
        !alone.shared().keep_alive_ended(),
        "during the shutdown delay"
    );
    alone.advance(secs(2));
    assert!(alone
        .machine
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
    assert!(alone.shared().keep_alive_ended());

    // Sockets inherited from systemd: clients move during the shutdown delay.
    let mut inherited = Sim::serving(config(), |_| {});
    inherited.shared().set_sockets_outlive();
    assert!(!inherited.shared().keep_alive_ended(), "before termination");
    inherited.stop();
    assert!(inherited.shared().keep_alive_ended());

    // Handed over: the machine says the sockets outlive the process by itself.
    let mut handed = Sim::serving(config(), |_| {});
    handed.input(Input::HandOverRequested);
    handed.input(Input::HandOverFinished(HandOverOutcome::Failed));
    assert!(
        !handed.shared().sockets_outlive(),
        "a failed hand-over keeps them"
    );
    handed.input(Input::HandOverRequested);
    handed.input(Input::HandOverFinished(HandOverOutcome::SuccessorReady));
    assert!(handed.shared().sockets_outlive());
    assert!(handed.shared().keep_alive_ended());
    assert!(!handed
        .machine
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
}
