//! Exact outputs: what the core's `Debug` and `Display` implementations, names and small
//! accessors return, pinned where the rest of the suite only looked at behaviour
//! (`docs/mutation-testing.md` lists, for each, the mutant `cargo-mutants` found surviving
//! before the test existed).

use std::sync::Arc;

use lameduck::gate::{Gate, Rejection};
use lameduck::health::parse_query;
use lameduck::machine::HookKind;
use lameduck::{Config, Machine, Shared, ShutdownMode};

fn prepared(setup: impl FnOnce(&mut Machine)) -> (Machine, Arc<Shared>) {
    let mut m = Machine::new(Config::default());
    setup(&mut m);
    m.handle_input(lameduck::Input::Prepare, lameduck::Instant::ZERO)
        .unwrap();
    let shared = m.shared().unwrap().clone();
    (m, shared)
}

#[test]
fn rejections_display_their_status() {
    assert_eq!(
        Rejection::NotAccepting.to_string(),
        "server is shutting down (503)"
    );
    assert_eq!(
        Rejection::RetryAfter.to_string(),
        "server is shutting down, retry later (429)"
    );
}

#[test]
fn gate_debug_shows_its_counts_and_mode() {
    let gate = Gate::new(ShutdownMode::SendRetryAfter);
    let _a = gate.admit_normal().unwrap();
    let _b = gate.admit_long_running().unwrap();
    let _c = gate.admit_long_running().unwrap();
    assert_eq!(
        format!("{gate:?}"),
        "Gate { closed: false, normal: 1, long_running: 2, mode: SendRetryAfter }"
    );
}

#[test]
fn gate_reports_its_mode() {
    assert_eq!(
        Gate::new(ShutdownMode::SendRetryAfter).mode(),
        ShutdownMode::SendRetryAfter
    );
    assert_eq!(
        Gate::new(ShutdownMode::CloseListener).mode(),
        ShutdownMode::CloseListener
    );
}

#[test]
fn tickets_debug_as_their_kind() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    assert_eq!(
        format!("{:?}", gate.admit_normal().unwrap()),
        "NormalTicket"
    );
    assert_eq!(
        format!("{:?}", gate.admit_long_running().unwrap()),
        "LongRunningTicket"
    );
    let (_m, shared) = prepared(|_| {});
    let owned = |class| match shared.admit(class) {
        lameduck::Admission::Normal(t) => format!("{t:?}"),
        lameduck::Admission::LongRunning(t) => format!("{t:?}"),
        other => panic!("{other:?}"),
    };
    assert_eq!(owned(lameduck::RequestClass::Normal), "OwnedNormalTicket");
    assert_eq!(
        owned(lameduck::RequestClass::LongRunning),
        "OwnedLongRunningTicket"
    );
}

#[test]
fn a_query_of_plus_signs_only_is_decoded() {
    let q = parse_query(Some("exclude=+&exclude=++"));
    assert_eq!(
        q.excludes().collect::<Vec<_>>(),
        [b" ".as_slice(), b"  ".as_slice()]
    );
}

#[test]
fn the_machine_names_what_was_registered() {
    let mut m = Machine::new(Config::default());
    let hook = m.add_hook(HookKind::AfterDrain, "flush").unwrap();
    let api = m.add_listener("api").unwrap();
    let admin = m.add_listener("admin").unwrap();
    let mux = m.add_routes_ready("routes").unwrap();
    assert_eq!(m.hook_kind(hook), Some(HookKind::AfterDrain));
    assert_eq!(m.hook_name(hook), Some("flush"));
    assert_eq!(m.listener_name(api), Some("api"));
    assert_eq!(m.listener_name(admin), Some("admin"));
    assert_eq!(m.routes_ready_name(mux), Some("routes"));
    assert_eq!(
        m.listeners().collect::<Vec<_>>(),
        [(api, "api"), (admin, "admin")]
    );
}

#[test]
fn machine_debug_shows_phase_timers_and_pending_events() {
    let (mut m, _) = prepared(|m| {
        m.add_listener("api").unwrap();
    });
    m.handle_input(lameduck::Input::Start, lameduck::Instant::ZERO)
        .unwrap();
    // One event waits to be polled; no timer is armed before a stop.
    assert_eq!(
        format!("{m:?}"),
        "Machine { phase: Starting, timers: TimerTable([None, None, None, None, None, None, \
         None]), pending_events: 1, .. }"
    );
}

#[test]
fn pending_events_are_reported_until_polled() {
    let (mut m, _) = prepared(|m| {
        m.add_listener("api").unwrap();
    });
    assert!(!m.has_pending_events());
    m.handle_input(lameduck::Input::Start, lameduck::Instant::ZERO)
        .unwrap();
    assert!(m.has_pending_events());
    while m.poll_event().is_some() {}
    assert!(!m.has_pending_events());
}

#[test]
fn endpoint_sets_unite() {
    use lameduck::health::Endpoint;
    use lameduck::shared::EndpointSet;
    let both = EndpointSet::READYZ.union(EndpointSet::LIVEZ);
    assert!(both.contains(Endpoint::Readyz) && both.contains(Endpoint::Livez));
    assert!(!both.contains(Endpoint::Healthz));
    // Overlapping sets: a bit in both stays.
    assert_eq!(
        EndpointSet::ALL.union(EndpointSet::READYZ),
        EndpointSet::ALL
    );
    assert_eq!(
        EndpointSet::READYZ.union(EndpointSet::READYZ),
        EndpointSet::READYZ
    );
}

#[test]
fn shared_holds_the_machines_configuration_and_debugs_its_state() {
    let config = Config::builder()
        .shutdown_delay(std::time::Duration::from_secs(3))
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    let mut m = Machine::new(config.clone());
    m.add_health_check(
        "db",
        lameduck::shared::EndpointSet::READYZ,
        Box::new(|| Ok(())),
    )
    .unwrap();
    m.handle_input(lameduck::Input::Prepare, lameduck::Instant::ZERO)
        .unwrap();
    let shared = m.shared().unwrap();
    assert_eq!(shared.config(), &config);
    assert_eq!(
        format!("{shared:?}"),
        "Shared { fired: {}, gate: Gate { closed: false, normal: 0, long_running: 0, \
         mode: SendRetryAfter }, checks: [\"ping\", \"db\", \"shutdown\"], .. }"
    );
}

#[test]
fn close_listener_mode_is_draining_until_both_the_drain_and_the_listeners_are_done() {
    use lameduck::sim::Simulator;
    use lameduck::{LifecycleSignal, Phase, RequestClass};
    let mut sim = Simulator::serving(Config::default(), |_| {}).unwrap();
    assert!(sim.open_request(RequestClass::Normal));
    sim.stop().unwrap();
    sim.advance(std::time::Duration::ZERO);
    // Close-listener mode stops listening at NotAcceptingNewRequest; the request is still in
    // flight.
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::HTTPServerStoppedListening));
    assert!(!sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    assert_eq!(sim.machine.phase(), Phase::Draining);
    sim.end_request(0);
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::InFlightRequestsDrained));
    assert_ne!(sim.machine.phase(), Phase::Draining);
}

#[test]
fn routes_complete_once_every_routes_ready_report_came() {
    let (mut m, shared) = prepared(|m| {
        m.add_listener("api").unwrap();
        m.add_routes_ready("routes").unwrap();
    });
    let now = lameduck::Instant::ZERO;
    m.handle_input(lameduck::Input::Start, now).unwrap();
    assert!(!shared.routes_complete());
    m.handle_input(
        lameduck::Input::RoutesReady(lameduck::machine::RoutesReadyId::from_raw(0)),
        now,
    )
    .unwrap();
    assert!(shared.routes_complete());
}

#[test]
fn check_names_are_those_of_the_endpoint() {
    use lameduck::health::Endpoint;
    use lameduck::shared::EndpointSet;
    let (_m, shared) = prepared(|m| {
        m.add_health_check("db", EndpointSet::READYZ, Box::new(|| Ok(())))
            .unwrap();
        m.add_health_check("disk", EndpointSet::LIVEZ, Box::new(|| Ok(())))
            .unwrap();
    });
    let names = |e| shared.check_names(e).collect::<Vec<_>>();
    assert_eq!(names(Endpoint::Readyz), ["ping", "db", "shutdown"]);
    assert_eq!(names(Endpoint::Livez), ["ping", "disk"]);
}

struct Noop;
impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn signal_futures_wait_for_their_signal() {
    use std::future::Future;
    use std::task::{Context, Poll};
    let (mut m, shared) = prepared(|m| {
        m.add_listener("api").unwrap();
    });
    let mut fut = Box::pin(shared.signal_fired(lameduck::LifecycleSignal::ShutdownInitiated));
    assert_eq!(
        format!("{fut:?}"),
        "LifecycleSignalFired { signal: ShutdownInitiated }"
    );
    let waker = std::task::Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
    let now = lameduck::Instant::ZERO;
    m.handle_input(lameduck::Input::Start, now).unwrap();
    m.handle_input(
        lameduck::Input::StopRequested(lameduck::machine::StopSource::Api),
        now,
    )
    .unwrap();
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(()));
}

#[test]
fn trace_events_and_rules_display_exactly() {
    use lameduck::trace::{check_trace, Rule, TraceEvent, TracedEvent};
    use lameduck::{Event, Instant, LifecycleSignal};
    use std::time::Duration;
    assert_eq!(
        TraceEvent::Signal(LifecycleSignal::HasBeenReady).to_string(),
        "HasBeenReady"
    );
    assert_eq!(TraceEvent::StopListening.to_string(), "StopListening");
    assert_eq!(TraceEvent::Exit(1).to_string(), "Exit(1)");
    let rules: [(Rule, &str); 12] = [
        (
            Rule::NothingAfterExit,
            "nothing may happen after the process exited",
        ),
        (
            Rule::SignalFiresOnce(LifecycleSignal::HasBeenReady),
            "HasBeenReady fired more than once",
        ),
        (
            Rule::Predecessor {
                event: Some(LifecycleSignal::NotAcceptingNewRequest),
                needs: LifecycleSignal::PreShutdownHooksStopped,
            },
            "NotAcceptingNewRequest fired before PreShutdownHooksStopped",
        ),
        (
            Rule::Predecessor {
                event: None,
                needs: LifecycleSignal::NotAcceptingNewRequest,
            },
            "listeners were stopped before NotAcceptingNewRequest",
        ),
        (Rule::StopListeningOnce, "listeners were stopped twice"),
        (
            Rule::StoppedListeningBeforeStop,
            "HTTPServerStoppedListening fired before the listeners were stopped",
        ),
        (
            Rule::MuxCompleteAfterShutdown,
            "MuxAndDiscoveryComplete fired after ShutdownInitiated",
        ),
        (
            Rule::ReadyAfterShutdown,
            "HasBeenReady fired after ShutdownInitiated",
        ),
        (
            Rule::CleanExitBeforeDone,
            "exit 0 before both InFlightRequestsDrained and HTTPServerStoppedListening",
        ),
        (Rule::ExitCode, "exit code other than 0 or 1"),
        (
            Rule::TimeGoesBack,
            "an event is timed before the one preceding it",
        ),
        (
            Rule::DelayTooShort {
                expected: Duration::from_secs(2),
                observed: Duration::from_secs(1),
            },
            "AfterShutdownDelayDuration came 1s after ShutdownInitiated, sooner than the \
             shutdown delay of 2s",
        ),
    ];
    for (rule, text) in rules {
        assert_eq!(rule.to_string(), text);
    }
    // The machine's StopListening is a trace event, timed when observed.
    let at = Instant::from_secs(3);
    assert_eq!(
        TracedEvent::from_event(
            &Event::StopListening {
                shutdown_deadline: None
            },
            at
        ),
        Some(TracedEvent::at(TraceEvent::StopListening, at))
    );
    // A trace without an exit is not complete.
    let running = [TracedEvent::untimed(TraceEvent::Signal(
        LifecycleSignal::ShutdownInitiated,
    ))];
    assert!(!check_trace(&Config::default(), &running)
        .unwrap()
        .complete());
}

#[test]
fn ready_after_shutdown_is_rejected() {
    use lameduck::trace::{check_trace, Rule, TraceEvent, TracedEvent};
    use lameduck::LifecycleSignal;
    let t = |s| TracedEvent::untimed(TraceEvent::Signal(s));
    let v = check_trace(
        &Config::default(),
        &[
            t(LifecycleSignal::ShutdownInitiated),
            t(LifecycleSignal::HasBeenReady),
        ],
    )
    .unwrap_err();
    assert_eq!((v.index, v.rule), (1, Rule::ReadyAfterShutdown));
    // Before it, HasBeenReady is legal.
    check_trace(
        &Config::default(),
        &[
            t(LifecycleSignal::HasBeenReady),
            t(LifecycleSignal::ShutdownInitiated),
        ],
    )
    .unwrap();
}

#[test]
fn stopped_listening_before_the_stop_and_exit_0_before_it_are_rejected() {
    use lameduck::trace::{check_trace, Rule, TraceEvent, TracedEvent};
    use lameduck::LifecycleSignal::*;
    let t = |s| TracedEvent::untimed(TraceEvent::Signal(s));
    let head = [
        t(ShutdownInitiated),
        t(AfterShutdownDelayDuration),
        t(PreShutdownHooksStopped),
        t(NotAcceptingNewRequest),
    ];
    // The trace shows StopListening, but only after HTTPServerStoppedListening.
    let mut early = head.to_vec();
    early.push(t(HTTPServerStoppedListening));
    early.push(TracedEvent::untimed(TraceEvent::StopListening));
    let v = check_trace(&Config::default(), &early).unwrap_err();
    assert_eq!((v.index, v.rule), (4, Rule::StoppedListeningBeforeStop));
    // Drained but never stopped listening: no exit 0.
    let mut unstopped = head.to_vec();
    unstopped.push(t(InFlightRequestsDrained));
    unstopped.push(TracedEvent::untimed(TraceEvent::Exit(0)));
    let v = check_trace(&Config::default(), &unstopped).unwrap_err();
    assert_eq!((v.index, v.rule), (5, Rule::CleanExitBeforeDone));
}

#[test]
fn config_options_describe_themselves() {
    use lameduck::config::ConfigOption;
    let durations: Vec<_> = ConfigOption::ALL
        .into_iter()
        .filter(|o| o.is_duration())
        .collect();
    assert_eq!(
        durations,
        [
            ConfigOption::ShutdownDelay,
            ConfigOption::ShutdownWatchTerminationGracePeriod,
            ConfigOption::RequestTimeout,
            ConfigOption::LivezGracePeriod,
            ConfigOption::IdleCloseSpread,
            ConfigOption::MaxConnectionAge,
            ConfigOption::MaxConnectionAgeGrace,
        ]
    );
    assert_eq!(
        ConfigOption::MaxConnectionAge.help(),
        "end each connection gracefully once it is this old (each drawn within +-10 %), so clients rebalance; 0 = off"
    );
    assert_eq!(
        ConfigOption::MaxConnectionAgeGrace.help(),
        "how long an aged connection's streams get before it is cut; 0 = no bound beyond the requests' own"
    );
    assert_eq!(
        ConfigOption::ShutdownDelay.help(),
        "lame-duck window: /readyz fails but requests are served this long after the stop signal"
    );
    let helps: std::collections::HashSet<_> =
        ConfigOption::ALL.into_iter().map(|o| o.help()).collect();
    assert_eq!(helps.len(), ConfigOption::ALL.len());
}

#[test]
fn names_of_hook_kinds_inputs_and_exit_reasons() {
    use lameduck::machine::ExitReason;
    use lameduck::Input;
    let kinds = [
        HookKind::PreShutdown,
        HookKind::PostStart,
        HookKind::AfterDrain,
        HookKind::Destroy,
    ];
    assert_eq!(
        kinds.map(HookKind::name),
        ["pre-shutdown", "post-start", "after-drain", "destroy"]
    );
    // An input refused in the wrong phase is named in the error.
    let mut m = Machine::new(Config::default());
    assert!(matches!(
        m.handle_input(Input::DrainProgress, lameduck::Instant::ZERO),
        Err(lameduck::machine::InputError::WrongPhase {
            input: "DrainProgress",
            ..
        })
    ));
    assert_eq!(
        ExitReason::Graceful.to_string(),
        "graceful termination completed"
    );
    assert_eq!(
        ExitReason::Failure.to_string(),
        "graceful termination completed after a failure"
    );
    assert_eq!(
        ExitReason::SecondSignal.to_string(),
        "second signal received, exiting at once"
    );
}

#[test]
fn post_start_hooks_register_their_checks() {
    // A post-start hook's check name is taken by a health check already.
    let mut m = Machine::new(Config::default());
    m.add_health_check(
        "poststarthook/warm",
        lameduck::shared::EndpointSet::ALL,
        Box::new(|| Ok(())),
    )
    .unwrap();
    assert!(matches!(
        m.add_hook(HookKind::PostStart, "warm"),
        Err(lameduck::machine::RegisterError::Duplicate { .. })
    ));
    // Another kind's hook of that name does not register a check.
    m.add_hook(HookKind::PreShutdown, "warm").unwrap();

    // The hook's own check follows its outcome, whatever hooks of other kinds came before.
    let (mut m, shared) = prepared(|m| {
        m.add_listener("api").unwrap();
        m.add_hook(HookKind::PreShutdown, "first").unwrap();
        m.add_hook(HookKind::PostStart, "warm").unwrap();
    });
    let now = lameduck::Instant::ZERO;
    let api = lameduck::machine::ListenerId::from_raw(0);
    m.handle_input(lameduck::Input::Start, now).unwrap();
    m.handle_input(lameduck::Input::ListenerServing(api), now)
        .unwrap();
    let body = |shared: &Shared| {
        let r = shared.health("/healthz", Some("verbose"), now).unwrap();
        String::from_utf8_lossy(r.body.as_ref()).into_owned()
    };
    assert!(!body(&shared).contains("[+]poststarthook/warm ok"));
    let warm = lameduck::machine::HookId::from_raw(1);
    m.handle_input(
        lameduck::Input::HookFinished {
            hook: warm,
            outcome: lameduck::machine::HookOutcome::Succeeded,
        },
        now,
    )
    .unwrap();
    assert!(
        body(&shared).contains("[+]poststarthook/warm ok"),
        "{}",
        body(&shared)
    );
}

#[test]
fn listeners_can_be_added_once_prepared() {
    let (mut m, _) = prepared(|_| {});
    m.add_listener("late").unwrap();
    assert!(matches!(
        m.add_listener("bad name"),
        Err(lameduck::machine::RegisterError::InvalidName { .. })
    ));
}

/// A drain whose requests all ended before the machine looked, even if it looks after the
/// deadline, did not time out.
#[test]
fn a_drain_that_emptied_by_its_deadline_did_not_time_out() {
    use lameduck::machine::StopSource;
    use lameduck::{Admission, Event, Input, Instant, RequestClass};
    let config = Config::builder()
        .shutdown_watch_termination_grace_period(std::time::Duration::from_secs(2))
        .build()
        .unwrap();
    let mut m = Machine::new(config);
    let api = m.add_listener("api").unwrap();
    let t0 = Instant::ZERO;
    m.handle_input(Input::Prepare, t0).unwrap();
    let shared = m.shared().unwrap().clone();
    m.handle_input(Input::Start, t0).unwrap();
    m.handle_input(Input::ListenerServing(api), t0).unwrap();
    let normal = shared.admit(RequestClass::Normal);
    let long = shared.admit(RequestClass::LongRunning);
    assert!(matches!(normal, Admission::Normal(_)));
    assert!(matches!(long, Admission::LongRunning(_)));
    m.handle_input(Input::StopRequested(StopSource::Api), t0)
        .unwrap();
    m.handle_timeout(t0);
    assert!(m.has_fired(lameduck::LifecycleSignal::NotAcceptingNewRequest));
    drop((normal, long));
    // Both deadlines have passed when the machine next runs.
    m.handle_timeout(Instant::from_secs(1000));
    let mut seen = 0;
    while let Some(e) = m.poll_event() {
        match e {
            Event::NormalDrainFinished { timed_out, .. }
            | Event::LongRunningDrainFinished { timed_out, .. } => {
                assert!(!timed_out, "{e:?}");
                seen += 1;
            }
            _ => {}
        }
    }
    assert_eq!(seen, 2);
}
