//! The shutdown planner: worst-case detection by the load balancer, the `E2 + t <= E3` check,
//! the total termination time per mode against `terminationGracePeriodSeconds`, the timeline,
//! invalid probe settings, and the totals cross-checked against the simulated machine.

mod common;

use std::time::Duration;

use common::{ms, secs, Sim};
use lameduck::machine::{HookKind, HookOutcome};
use lameduck::plan::{
    ceil_seconds, plan, EventKind, Plan, PlanError, PlanInput, ProbeSettings, Problem,
    DEFAULT_TERMINATION_GRACE_PERIOD, GRACE_PERIOD_MARGIN,
};
use lameduck::{Config, Event, Input, LifecycleSignal, RequestClass, ShutdownMode};

/// The worked example: an AWS load balancer probing `/readyz` every 10 s with a 10 s timeout,
/// unhealthy after 2 failures.
fn aws() -> ProbeSettings {
    ProbeSettings::new(secs(10), secs(10), 2)
}

fn config(delay: Duration, request_timeout: Duration) -> Config {
    Config::builder()
        .shutdown_delay(delay)
        .request_timeout(request_timeout)
        .build()
        .unwrap()
}

fn run(input: PlanInput) -> Plan {
    plan(&input).unwrap()
}

#[test]
fn aws_worked_example_30s_is_just_enough() {
    assert_eq!(aws().detection_worst_case(), Ok(secs(30)));
    let p = run(PlanInput::new(aws(), config(secs(30), secs(60))));
    assert_eq!(p.detection_worst_case, secs(30));
    assert_eq!(p.out_of_service_at(), secs(30));
    assert_eq!(p.min_safe_shutdown_delay, secs(30));
    assert_eq!(p.shutdown_delay, secs(30));
    assert!(p.is_safe(), "{:?}", p.problems);
    assert!(p.problems.is_empty());
}

#[test]
fn aws_worked_example_20s_is_unsafe() {
    let p = run(PlanInput::new(aws(), config(secs(20), secs(60))));
    assert!(!p.is_safe());
    assert_eq!(p.min_safe_shutdown_delay, secs(30));
    assert_eq!(
        p.problems,
        [Problem::DetectionAfterStopAccepting {
            detection: secs(30),
            shutdown_delay: secs(20),
        }]
    );
    let msg = p.problems[0].to_string();
    assert!(msg.contains("minimum safe shutdown delay is 30s"), "{msg}");
    assert!(msg.contains("last 10s"), "{msg}");
    assert_eq!(p.problems[0].name(), "detection_after_stop_accepting");
    // One nanosecond short is unsafe too.
    let p = run(PlanInput::new(
        aws(),
        config(secs(30) - Duration::from_nanos(1), secs(60)),
    ));
    assert!(!p.is_safe());
}

#[test]
fn detection_formula() {
    // threshold × interval + timeout + propagation
    let probes = ProbeSettings::new(secs(5), secs(2), 3).propagation_delay(secs(4));
    assert_eq!(probes.detection_worst_case(), Ok(secs(21)));
    let probes = ProbeSettings::new(ms(1500), ms(500), 1);
    assert_eq!(probes.detection_worst_case(), Ok(secs(2)));
    // Kubernetes' readiness defaults: 3 × 10 s + 1 s.
    assert_eq!(
        ProbeSettings::default().detection_worst_case(),
        Ok(secs(31))
    );
    // Overlapping probes: the k-th still starts at k × interval.
    let probes = ProbeSettings::new(secs(5), secs(12), 2).allow_overlapping_probes(true);
    assert_eq!(probes.detection_worst_case(), Ok(secs(22)));
}

#[test]
fn hooks_do_not_count_towards_the_check() {
    // Hooks may end early, so only the shutdown delay is guaranteed before E3.
    let p = run(PlanInput::new(aws(), config(secs(10), secs(5))).pre_shutdown_hooks(secs(40)));
    assert!(!p.is_safe());
    assert_eq!(p.stop_accepting_worst_case, secs(40));
    assert_eq!(p.total_worst_case, Some(secs(40 + 5)));
}

#[test]
fn close_listener_mode_total() {
    // max(delay, hooks) + max(request_timeout, watch grace)
    let cfg = Config::builder()
        .shutdown_delay(secs(10))
        .request_timeout(secs(20))
        .shutdown_watch_termination_grace_period(secs(30))
        .build()
        .unwrap();
    let p = run(PlanInput::new(aws(), cfg.clone()).pre_shutdown_hooks(secs(15)));
    assert_eq!(p.mode, ShutdownMode::CloseListener);
    assert_eq!(p.stop_accepting_worst_case, secs(15));
    assert_eq!(p.normal_drain_worst_case, Some(secs(20)));
    assert_eq!(p.total_worst_case, Some(secs(45)));
    assert_eq!(p.suggested_termination_grace_period, Some(secs(50)));

    // The request timeout dominates a shorter watch grace period.
    let cfg = cfg
        .to_builder()
        .shutdown_watch_termination_grace_period(secs(5))
        .build()
        .unwrap();
    let p = run(PlanInput::new(aws(), cfg));
    assert_eq!(p.total_worst_case, Some(secs(10 + 20)));

    // Defaults: a 60 s request timeout after a 30 s delay.
    let p = run(PlanInput::new(aws(), config(secs(30), secs(60))));
    assert_eq!(p.total_worst_case, Some(secs(90)));
    assert_eq!(p.suggested_termination_grace_period, Some(secs(95)));
    assert_eq!(p.termination_grace_period, None);
}

#[test]
fn retry_after_mode_total_adds_the_http_shutdown_timeout() {
    let cfg = Config::builder()
        .shutdown_delay(secs(10))
        .request_timeout(secs(20))
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    let p = run(PlanInput::new(aws(), cfg.clone()));
    assert_eq!(p.mode, ShutdownMode::SendRetryAfter);
    assert_eq!(p.total_worst_case, Some(secs(10 + 20 + 2)));
    assert_eq!(p.suggested_termination_grace_period, Some(secs(37)));
    let cfg = cfg
        .to_builder()
        .shutdown_watch_termination_grace_period(secs(60))
        .build()
        .unwrap();
    let p = run(PlanInput::new(aws(), cfg).pre_shutdown_hooks(secs(12)));
    assert_eq!(p.total_worst_case, Some(secs(12 + 60 + 2)));
}

#[test]
fn termination_budget() {
    let input = PlanInput::new(aws(), config(secs(30), secs(60)))
        .termination_grace_period(DEFAULT_TERMINATION_GRACE_PERIOD);
    let p = run(input.clone());
    assert!(!p.is_safe());
    assert_eq!(
        p.problems,
        [Problem::ExceedsTerminationGracePeriod {
            total: secs(90),
            termination_grace_period: secs(30),
        }]
    );
    let msg = p.problems[0].to_string();
    assert!(msg.contains("1m30s") && msg.contains("30s"), "{msg}");

    // The suggestion fits, and so does the exact total.
    let p = run(input.clone().termination_grace_period(secs(95)));
    assert!(p.is_safe(), "{:?}", p.problems);
    let p = run(input.clone().termination_grace_period(secs(90)));
    assert!(p.is_safe(), "{:?}", p.problems);
    let p = run(input.termination_grace_period(secs(89)));
    assert!(!p.is_safe());

    // Both problems at once.
    let p =
        run(PlanInput::new(aws(), config(secs(20), secs(60))).termination_grace_period(secs(30)));
    assert_eq!(p.problems.len(), 2);
}

#[test]
fn suggestion_rounds_up_and_adds_the_margin() {
    assert_eq!(GRACE_PERIOD_MARGIN, secs(5));
    assert_eq!(ceil_seconds(ms(30_500)), 31);
    assert_eq!(ceil_seconds(secs(30)), 30);
    assert_eq!(ceil_seconds(Duration::ZERO), 0);
    assert_eq!(ceil_seconds(Duration::MAX), u64::MAX);
    let p = run(PlanInput::new(aws(), config(ms(30_500), ms(2500))));
    assert_eq!(p.total_worst_case, Some(ms(33_000)));
    assert_eq!(p.suggested_termination_grace_period, Some(secs(38)));
    let p = run(PlanInput::new(aws(), config(ms(30_500), ms(2400))));
    assert_eq!(p.total_worst_case, Some(ms(32_900)));
    assert_eq!(p.suggested_termination_grace_period, Some(secs(38)));
}

#[test]
fn zero_request_timeout_has_no_bound() {
    let p = run(PlanInput::new(aws(), config(secs(30), Duration::ZERO)));
    assert_eq!(p.normal_drain_worst_case, None);
    assert_eq!(p.total_worst_case, None);
    assert_eq!(p.suggested_termination_grace_period, None);
    assert!(p.is_safe(), "no budget given: {:?}", p.problems);
    assert!(!p.timeline.iter().any(|e| e.kind == EventKind::Exit));
    let p =
        run(PlanInput::new(aws(), config(secs(30), Duration::ZERO))
            .termination_grace_period(secs(600)));
    assert_eq!(
        p.problems,
        [Problem::UnboundedDrain {
            termination_grace_period: secs(600)
        }]
    );
    assert!(p.problems[0].to_string().contains("--request-timeout 0"));
}

#[test]
fn timeline_of_the_worked_example() {
    let cfg = Config::builder()
        .shutdown_delay(secs(30))
        .request_timeout(secs(10))
        .shutdown_watch_termination_grace_period(secs(5))
        .build()
        .unwrap();
    let probes = aws().propagation_delay(secs(2));
    let p = run(PlanInput::new(probes, cfg).termination_grace_period(secs(60)));
    let tags: Vec<&str> = p.timeline.iter().map(|e| e.tag.as_str()).collect();
    assert_eq!(
        tags,
        ["E1", "E2", "P0", "LD", "P1", "P2", "PD", "E3", "DN", "DW", "LB", "DR", "EXIT", "KILL"]
    );
    let at = |tag: &str| p.timeline.iter().find(|e| e.tag == tag).unwrap();
    assert_eq!(at("P1").at, secs(10));
    assert_eq!(at("P1").duration, secs(10));
    assert_eq!(at("P1").kind, EventKind::ProbeFails { index: 1 });
    assert_eq!(at("P2").at, secs(20));
    assert_eq!(at("P2").end(), secs(30));
    assert!(at("P2").label.contains("by 30s"), "{}", at("P2").label);
    assert_eq!(at("PD").at, secs(30));
    assert_eq!(at("PD").end(), secs(32));
    assert_eq!(at("LB").at, secs(32));
    assert_eq!(at("LD").end(), secs(30));
    assert_eq!(at("E3").at, secs(30));
    assert_eq!(at("E3").kind, EventKind::StopAccepting);
    assert!(at("E3").label.contains("the listener closes"));
    assert_eq!(at("DN").end(), secs(40));
    assert_eq!(at("DW").end(), secs(35));
    assert_eq!(at("EXIT").at, secs(40));
    assert_eq!(at("KILL").at, secs(60));
    assert!(p.timeline.windows(2).all(|w| w[0].at <= w[1].at));
    // 32 s detection > 30 s delay.
    assert_eq!(p.min_safe_shutdown_delay, secs(32));
    assert!(!p.is_safe());
}

#[test]
fn timeline_in_retry_after_mode_with_hooks() {
    let cfg = Config::builder()
        .shutdown_delay(secs(30))
        .request_timeout(secs(4))
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    let p =
        run(PlanInput::new(ProbeSettings::new(secs(5), secs(2), 3), cfg)
            .pre_shutdown_hooks(secs(35)));
    let tags: Vec<&str> = p.timeline.iter().map(|e| e.tag.as_str()).collect();
    assert_eq!(
        tags,
        [
            "E1", "E2", "P0", "LD", "HK", "P1", "P2", "P3", "LB", "E3", "DN", "DR", "SL", "HS",
            "EXIT"
        ]
    );
    let at = |tag: &str| p.timeline.iter().find(|e| e.tag == tag).unwrap();
    assert_eq!(at("LB").at, secs(17));
    assert_eq!(at("E3").at, secs(35));
    assert!(at("E3").label.contains("429"), "{}", at("E3").label);
    assert!(
        at("E3").label.contains("after the hooks"),
        "{}",
        at("E3").label
    );
    assert_eq!(at("SL").at, secs(39));
    assert_eq!(at("HS").end(), secs(41));
    assert_eq!(at("EXIT").at, secs(41));
    assert!(p.is_safe());
}

#[test]
fn invalid_probe_settings_name_the_flag() {
    let cfg = config(secs(30), secs(60));
    let err = |probes: ProbeSettings| plan(&PlanInput::new(probes, cfg.clone())).unwrap_err();

    let e = err(ProbeSettings::new(Duration::ZERO, secs(1), 2));
    assert_eq!(e, PlanError::ZeroInterval);
    assert_eq!(e.flag(), Some("--probe-interval"));
    assert!(e.to_string().contains("--probe-interval"));

    let e = err(ProbeSettings::new(secs(10), Duration::ZERO, 2));
    assert_eq!(e, PlanError::ZeroTimeout);
    assert!(e.to_string().contains("--probe-timeout"));

    let e = err(ProbeSettings::new(secs(5), secs(6), 2));
    assert_eq!(
        e,
        PlanError::TimeoutAboveInterval {
            timeout: secs(6),
            interval: secs(5)
        }
    );
    assert_eq!(e.flag(), Some("--probe-timeout"));
    let msg = e.to_string();
    assert!(msg.starts_with("--probe-timeout (6s)"), "{msg}");
    assert!(msg.contains("--probe-interval (5s)"), "{msg}");
    assert!(msg.contains("--overlapping-probes"), "{msg}");
    // Equal is fine; above is fine when overlapping probes are allowed.
    assert!(plan(&PlanInput::new(
        ProbeSettings::new(secs(5), secs(5), 2),
        cfg.clone()
    ))
    .is_ok());
    assert!(plan(&PlanInput::new(
        ProbeSettings::new(secs(5), secs(6), 2).allow_overlapping_probes(true),
        cfg.clone()
    ))
    .is_ok());

    let e = err(ProbeSettings::new(secs(10), secs(1), 0));
    assert_eq!(e, PlanError::ZeroThreshold);
    assert_eq!(e.flag(), Some("--unhealthy-threshold"));
    assert!(e.to_string().contains("--unhealthy-threshold"));

    let e = err(ProbeSettings::new(Duration::MAX, secs(1), u32::MAX));
    assert_eq!(e, PlanError::Overflow);
    assert_eq!(e.flag(), None);
    let e = err(ProbeSettings::new(Duration::MAX, Duration::MAX, 1));
    assert_eq!(e, PlanError::Overflow);
    let e = err(ProbeSettings::new(secs(1), secs(1), 1).propagation_delay(Duration::MAX));
    assert_eq!(e, PlanError::Overflow);
}

#[test]
fn large_values_do_not_panic() {
    let max = lameduck::config::MAX_CONFIG_DURATION;
    let cfg = Config::builder()
        .shutdown_delay(max)
        .request_timeout(max)
        .shutdown_watch_termination_grace_period(max)
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    let probes = ProbeSettings::new(max, max, u32::MAX);
    let _ = plan(&PlanInput::new(probes, cfg.clone()).pre_shutdown_hooks(Duration::MAX));
    let probes = ProbeSettings::new(secs(1), secs(1), 1);
    let p = plan(&PlanInput::new(probes, cfg).termination_grace_period(Duration::MAX)).unwrap();
    assert!(p.is_safe());
}

/// Runs the machine as an adapter drives it, at its worst: a pre-shutdown hook taking
/// `hooks`; a normal request admitted just before the gate closes whose handler never
/// answers, so the adapter releases it at its own deadline (`request_timeout` after
/// admission, the 504 or the abort); a long-running request whose handler ignores the
/// shutdown notice; and a server whose connections never finish. Returns when it exited.
fn simulated_exit(config: Config, hooks: Duration) -> Duration {
    let mut hook = None;
    let request_timeout = config.request_timeout();
    let e3 = config.shutdown_delay().max(hooks);
    let mut sim = Sim::serving(config, |m| {
        hook = Some(m.add_hook(HookKind::PreShutdown, "slow").unwrap());
    });
    sim.auto_stop_listeners = false;
    assert!(sim.open_request(RequestClass::LongRunning));
    sim.stop();
    let t0 = sim.now;
    sim.advance(hooks);
    // Admitted as late as possible: at the instant the gate closes (E3).
    let mut normal = None;
    if e3 > hooks {
        sim.finish_hook(hook.unwrap(), HookOutcome::Succeeded);
        sim.advance_to(t0 + (e3 - Duration::from_nanos(1)));
        normal.replace(sim.shared().admit(RequestClass::Normal));
        sim.advance(Duration::from_nanos(1));
    } else {
        normal.replace(sim.shared().admit(RequestClass::Normal));
        sim.finish_hook(hook.unwrap(), HookOutcome::Succeeded);
    }
    let admitted_at = t0 + e3;
    assert!(
        sim.machine
            .has_fired(LifecycleSignal::NotAcceptingNewRequest),
        "the gate closed at E3"
    );
    let normal_deadline = admitted_at + request_timeout;
    let api = sim.listeners[0];
    let mut stopped = false;
    for _ in 0..10_000 {
        if sim.exit.is_some() {
            break;
        }
        if !stopped
            && sim
                .log
                .iter()
                .any(|(_, e)| matches!(e, Event::StopListening { .. }))
        {
            // The listener closes at once; its server never finishes on its own.
            sim.input(Input::ListenerStopped(api));
            stopped = true;
        }
        let next_timer = sim.machine.poll_timeout();
        let next = match (&normal, next_timer) {
            (Some(_), Some(t)) => t.min(normal_deadline),
            (Some(_), None) => normal_deadline,
            (None, Some(t)) => t,
            (None, None) => break,
        };
        sim.advance_to(next);
        if sim.now >= normal_deadline && normal.take().is_some() {
            // The adapter's deadline: the request is released (the machine may have exited
            // at this same instant, at its own bound of the normal drain).
            let _ = sim.0.input(Input::DrainProgress);
        }
    }
    let (at, _) = sim
        .log
        .iter()
        .find(|(_, e)| matches!(e, Event::Exit { .. }))
        .expect("exited");
    at.since_epoch()
}

#[test]
fn totals_match_the_simulated_machine() {
    let cases = [
        (10, 0, 20, 0, false),
        (10, 15, 20, 30, false),
        (5, 0, 3, 10, false),
        (10, 0, 20, 0, true),
        (10, 12, 20, 60, true),
        (0, 0, 1, 0, true),
    ];
    for (delay, hooks, rt, grace, retry_after_mode) in cases {
        let cfg = Config::builder()
            .shutdown_delay(secs(delay))
            .request_timeout(secs(rt))
            .shutdown_watch_termination_grace_period(secs(grace))
            .shutdown_send_retry_after(retry_after_mode)
            .build()
            .unwrap();
        let p = run(PlanInput::new(aws(), cfg.clone()).pre_shutdown_hooks(secs(hooks)));
        let exit = simulated_exit(cfg, secs(hooks));
        assert_eq!(
            Some(exit),
            p.total_worst_case,
            "delay {delay} hooks {hooks} rt {rt} grace {grace} retry-after mode {retry_after_mode}"
        );
    }
}

#[test]
fn long_runs_of_probes_are_summarised() {
    let cfg = config(secs(30), secs(10));
    // Ten probes are listed one by one.
    let p = run(PlanInput::new(
        ProbeSettings::new(secs(1), ms(500), 10),
        cfg.clone(),
    ));
    let probes: Vec<&str> = p
        .timeline
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ProbeFails { .. } | EventKind::ProbesFail { .. }
            )
        })
        .map(|e| e.tag.as_str())
        .collect();
    assert_eq!(
        probes,
        ["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10"]
    );
    // Eleven: the first five, one span, the last two.
    let p = run(PlanInput::new(
        ProbeSettings::new(secs(1), ms(500), 11),
        cfg.clone(),
    ));
    let probes: Vec<_> = p
        .timeline
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ProbeFails { .. } | EventKind::ProbesFail { .. }
            )
        })
        .collect();
    let tags: Vec<&str> = probes.iter().map(|e| e.tag.as_str()).collect();
    assert_eq!(tags, ["P1", "P2", "P3", "P4", "P5", "P6..P9", "P10", "P11"]);
    assert_eq!(probes[5].kind, EventKind::ProbesFail { first: 6, last: 9 });
    assert_eq!(probes[5].at, secs(6));
    assert_eq!(probes[5].end(), ms(9_500));
    assert_eq!(p.detection_worst_case, ms(11_500));
    // The largest threshold plans at once, with a short timeline.
    let p = run(PlanInput::new(
        ProbeSettings::new(Duration::from_nanos(1), Duration::from_nanos(1), u32::MAX),
        cfg,
    ));
    assert_eq!(
        p.detection_worst_case,
        Duration::from_nanos(u64::from(u32::MAX) + 1)
    );
    assert!(p.timeline.len() < 30, "{}", p.timeline.len());
    let last = p
        .timeline
        .iter()
        .find(|e| e.tag == format!("P{}", u32::MAX))
        .unwrap();
    assert_eq!(last.end(), p.detection_worst_case);
}
