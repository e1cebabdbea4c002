//! Hook failures: the drain still runs and the exit code is 1 at the end.

mod common;

use common::{secs, Sim};
use lameduck::machine::{HookKind, HookOutcome};
use lameduck::{Config, Event, Input, LifecycleSignal, RequestClass};

#[test]
fn a_failing_pre_shutdown_hook_still_drains_and_exits_1() {
    let (mut ok, mut bad) = (None, None);
    let mut sim = Sim::serving(
        Config::builder().shutdown_delay(secs(1)).build().unwrap(),
        |m| {
            ok = Some(m.add_hook(HookKind::PreShutdown, "ok").unwrap());
            bad = Some(m.add_hook(HookKind::PreShutdown, "bad").unwrap());
        },
    );
    let shared = sim.shared();
    let in_flight = shared.admit(RequestClass::Normal);
    sim.stop();
    sim.finish_hook(bad.unwrap(), HookOutcome::Panicked);
    assert!(sim.log.iter().any(|(_, e)| *e
        == Event::HookFailed {
            hook: bad.unwrap(),
            outcome: HookOutcome::Panicked
        }));
    assert_eq!(sim.machine.hook_name(bad.unwrap()), Some("bad"));
    assert!(!sim
        .machine
        .has_fired(LifecycleSignal::PreShutdownHooksStopped));
    sim.finish_hook(ok.unwrap(), HookOutcome::Succeeded);
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::PreShutdownHooksStopped));
    sim.advance(secs(1));
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
    assert_eq!(sim.exit, None, "the in-flight request is still drained");
    drop(in_flight);
    sim.input(Input::DrainProgress);
    assert_eq!(sim.exit, Some(1));
    sim.check();
}

#[test]
fn a_failing_post_start_hook_starts_a_graceful_termination_and_exits_1() {
    let mut hook = None;
    let mut sim = Sim::serving(Config::default(), |m| {
        hook = Some(m.add_hook(HookKind::PostStart, "warm-cache").unwrap());
    });
    assert_eq!(sim.count(|e| *e == Event::RunPostStartHooks), 1);
    let shared = sim.shared();
    let body = shared.health("/readyz", None, sim.now).unwrap();
    assert_eq!(body.status, 500);
    assert!(body
        .body
        .contains("[-]poststarthook/warm-cache failed: reason withheld\n"));
    sim.finish_hook(hook.unwrap(), HookOutcome::Failed);
    assert!(sim.machine.has_fired(LifecycleSignal::ShutdownInitiated));
    assert_eq!(sim.run_to_exit(10), Some(1));
    sim.check();
}

#[test]
fn after_drain_hooks_run_after_the_drain_and_hold_the_exit() {
    let mut flush = None;
    let mut sim = Sim::serving(Config::default(), |m| {
        flush = Some(m.add_hook(HookKind::AfterDrain, "flush-logs").unwrap());
    });
    sim.stop();
    let drained = sim.log.iter().position(|(_, e)| {
        *e == Event::Signal {
            signal: LifecycleSignal::InFlightRequestsDrained,
            at: sim.now,
        }
    });
    let run = sim
        .log
        .iter()
        .position(|(_, e)| *e == Event::RunAfterDrainHooks);
    assert!(drained.unwrap() < run.unwrap());
    assert_eq!(sim.exit, None);
    sim.finish_hook(flush.unwrap(), HookOutcome::Succeeded);
    assert_eq!(sim.exit, Some(0));
}

#[test]
fn destroy_hooks_run_on_every_exit_path_but_the_second_signal() {
    // (how the termination ends, the exit code, whether the destroy hook runs)
    let paths = [
        ("graceful", 0, true),
        ("after a failed pre-shutdown hook", 1, true),
        ("second signal", 1, false),
    ];
    for (path, code, runs_destroy) in paths {
        let mut pre = None;
        let mut destroy = None;
        let mut sim = Sim::serving(
            Config::builder().shutdown_delay(secs(10)).build().unwrap(),
            |m| {
                pre = Some(m.add_hook(HookKind::PreShutdown, "deregister").unwrap());
                destroy = Some(m.add_hook(HookKind::Destroy, "close-db").unwrap());
            },
        );
        sim.stop();
        match path {
            "second signal" => sim.stop(),
            "graceful" => sim.finish_hook(pre.unwrap(), HookOutcome::Succeeded),
            _ => sim.finish_hook(pre.unwrap(), HookOutcome::Failed),
        }
        if runs_destroy {
            // Past the 10 s delay, well before the destroy hooks' own time runs out.
            sim.advance(secs(11));
            // The exit waits for the destroy hook...
            assert_eq!(sim.count(|e| *e == Event::RunDestroyHooks), 1, "{path}");
            assert_eq!(sim.exit, None, "{path}: exit before the destroy hook ended");
            sim.finish_hook(destroy.unwrap(), HookOutcome::Failed);
        }
        // ... and its outcome does not change the exit code.
        assert_eq!(sim.exit, Some(code), "{path}");
        assert_eq!(
            sim.count(|e| *e == Event::RunDestroyHooks),
            usize::from(runs_destroy),
            "{path}"
        );
        sim.check();
    }
}

#[test]
fn a_listener_that_dies_terminates_gracefully_with_exit_1() {
    let mut sim = Sim::serving(Config::default(), |_| {});
    let api = sim.listeners[0];
    sim.auto_stop_listeners = false;
    sim.input(Input::ListenerStopped(api));
    assert!(sim.machine.has_fired(LifecycleSignal::ShutdownInitiated));
    sim.input(Input::ServerStopped(api));
    assert_eq!(sim.exit, Some(1));
    sim.check();
}
