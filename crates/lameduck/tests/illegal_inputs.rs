//! Inputs that are illegal in the current state return a typed error and change nothing.

use lameduck::machine::{HookKind, HookOutcome, InputError, RegisterError, StopSource};
use lameduck::{Config, Input, Instant, Lifecycle, Machine, Phase};

fn snapshot(m: &Machine) -> (Phase, Option<Instant>, u8) {
    (
        m.phase(),
        m.poll_timeout(),
        m.shared().map_or(0, |s| s.fired().bits()),
    )
}

#[test]
fn illegal_inputs_are_errors_and_change_nothing() {
    let now = Instant::ZERO;
    let mut m = Machine::new(Config::default());
    let hook = m.add_hook(HookKind::PreShutdown, "h").unwrap();
    let l = m.add_listener("api").unwrap();
    assert!(matches!(
        m.handle_input(Input::StopRequested(StopSource::OsSignal), now),
        Err(InputError::WrongPhase {
            phase: Phase::Configuring,
            ..
        })
    ));
    assert!(matches!(
        m.handle_input(Input::Start, now),
        Err(InputError::WrongPhase { .. })
    ));
    m.handle_input(Input::Prepare, now).unwrap();
    assert!(matches!(
        m.handle_input(Input::Prepare, now),
        Err(InputError::WrongPhase { .. })
    ));
    assert!(matches!(
        m.add_hook(HookKind::PreShutdown, "late"),
        Err(RegisterError::AlreadyPrepared { .. })
    ));
    m.handle_input(Input::Start, now).unwrap();
    let before = snapshot(&m);
    for bad in [
        Input::HookFinished {
            hook,
            outcome: HookOutcome::Succeeded,
        },
        Input::ServerStopped(l),
        Input::ListenerServing(lameduck::machine::ListenerId::from_raw(7)),
    ] {
        assert!(m.handle_input(bad, now).is_err(), "{bad:?}");
        assert_eq!(snapshot(&m), before);
    }
    m.handle_input(Input::ListenerServing(l), now).unwrap();
    assert_eq!(
        m.handle_input(Input::ListenerServing(l), now),
        Err(InputError::ListenerRepeated {
            listener: l,
            input: "ListenerServing"
        })
    );
    while m.poll_event().is_some() {}
    m.handle_input(Input::StopRequested(StopSource::OsSignal), now)
        .unwrap();
    m.handle_input(
        Input::HookFinished {
            hook,
            outcome: HookOutcome::Succeeded,
        },
        now,
    )
    .unwrap();
    assert_eq!(
        m.handle_input(
            Input::HookFinished {
                hook,
                outcome: HookOutcome::Succeeded
            },
            now
        ),
        Err(InputError::HookNotRunning(hook))
    );
    m.handle_input(Input::StopRequested(StopSource::OsSignal), now)
        .unwrap();
    assert_eq!(m.phase(), Phase::Exited);
    assert!(matches!(
        m.handle_input(Input::DrainProgress, now),
        Err(InputError::WrongPhase {
            phase: Phase::Exited,
            ..
        })
    ));
}

#[test]
fn registration_errors_are_typed() {
    let mut m = Machine::new(Config::default());
    m.add_hook(HookKind::PreShutdown, "a").unwrap();
    assert!(matches!(
        m.add_hook(HookKind::PreShutdown, "a"),
        Err(RegisterError::Duplicate { .. })
    ));
    // The same name is fine for another kind.
    m.add_hook(HookKind::PostStart, "a").unwrap();
    assert!(matches!(
        m.add_hook(HookKind::PostStart, ""),
        Err(RegisterError::InvalidName { .. })
    ));
    assert!(matches!(
        m.add_health_check(
            "ping",
            lameduck::shared::EndpointSet::ALL,
            Box::new(|| Ok(()))
        ),
        Err(RegisterError::Duplicate { .. })
    ));
    assert!(matches!(
        m.add_health_check(
            "poststarthook/a",
            lameduck::shared::EndpointSet::ALL,
            Box::new(|| Ok(()))
        ),
        Err(RegisterError::Duplicate { .. })
    ));
    let err = m
        .add_listener("api")
        .and_then(|_| m.add_listener("api"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to add listener \"api\" because it is already registered"
    );
}

#[test]
fn typestate_converts_to_and_from_the_runtime_machine() {
    let configuring = Lifecycle::new(Config::default());
    let m = configuring.into_machine();
    let prepared = Lifecycle::<lameduck::Prepared>::try_from_machine(m).unwrap_err();
    let configuring = Lifecycle::<lameduck::Configuring>::try_from_machine(prepared).unwrap();
    let running = configuring.prepare().start(Instant::ZERO);
    assert_eq!(running.phase(), Phase::Serving);
    let m = running.into_machine();
    let mut running = Lifecycle::<lameduck::Running>::try_from_machine(m).unwrap();
    running
        .request_stop(StopSource::Api, Instant::ZERO)
        .unwrap();
    let mut exited = false;
    while let Some(e) = running.poll_event() {
        exited |= matches!(e, lameduck::Event::Exit { code: 0, .. });
    }
    assert!(exited);
    assert!(Lifecycle::<lameduck::Running>::try_from_machine(running.into_machine()).is_err());
}
