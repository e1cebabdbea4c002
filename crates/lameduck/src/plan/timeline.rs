//! The worst-case timeline of a plan: every moment and span from the stop signal to the
//! exit, for people ([`TimelineEvent::label`]) and programs ([`EventKind`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::input::{add, mul, PlanError, PlanInput};
use crate::config::{ShutdownMode, MODE_B_HTTP_SHUTDOWN_TIMEOUT};
use crate::duration::GoDuration;

/// What a [`TimelineEvent`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// E1: the stop signal, `ShutdownInitiated`.
    Signal,
    /// E2: `/readyz` turns red.
    ReadinessRed,
    /// P0: the last successful probe, just before E2.
    ProbeOk,
    /// A failing probe, from its start for at most its timeout.
    ProbeFails {
        /// 1 for P1, up to the unhealthy threshold.
        index: u32,
    },
    /// Failing probes `first..=last` in the middle of a long run, as one span from the first
    /// one's start to the last one's timeout (see [`MAX_LISTED_PROBES`]).
    ProbesFail {
        /// The first probe of the span.
        first: u32,
        /// The last probe of the span.
        last: u32,
    },
    /// The propagation delay after the last failing probe.
    Propagation,
    /// The load balancer has taken the instance out of service (worst case).
    OutOfService,
    /// The lame-duck window, from E1 to `AfterShutdownDelayDuration`: `/readyz` red, requests
    /// served.
    LameDuck,
    /// The pre-shutdown hooks, from E1 until `PreShutdownHooksStopped` at the latest.
    PreShutdownHooks,
    /// E3: `NotAcceptingNewRequest`.
    StopAccepting,
    /// The drain of normal requests (at most `request_timeout` + 1 s).
    NormalDrain,
    /// The drain of long-running requests (at most the watch grace period).
    LongRunningDrain,
    /// `InFlightRequestsDrained`, at the latest.
    Drained,
    /// The listener closes (retry-after mode: after the drain; close-listener mode closes it
    /// at E3).
    StopListening,
    /// The HTTP server's shutdown timeout after the listener closes (retry-after mode: 2 s).
    HttpShutdown,
    /// The process exits, at the latest.
    Exit,
    /// Kubernetes sends `SIGKILL`: `terminationGracePeriodSeconds` after E1.
    Kill,
}

impl EventKind {
    /// A short machine-readable name, such as `probe_fails`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            EventKind::Signal => "signal",
            EventKind::ReadinessRed => "readiness_red",
            EventKind::ProbeOk => "probe_ok",
            EventKind::ProbeFails { .. } => "probe_fails",
            EventKind::ProbesFail { .. } => "probes_fail",
            EventKind::Propagation => "propagation",
            EventKind::OutOfService => "out_of_service",
            EventKind::LameDuck => "lame_duck",
            EventKind::PreShutdownHooks => "pre_shutdown_hooks",
            EventKind::StopAccepting => "stop_accepting",
            EventKind::NormalDrain => "normal_drain",
            EventKind::LongRunningDrain => "long_running_drain",
            EventKind::Drained => "drained",
            EventKind::StopListening => "stop_listening",
            EventKind::HttpShutdown => "http_shutdown",
            EventKind::Exit => "exit",
            EventKind::Kill => "kill",
        }
    }
}

/// One moment (or, with a non-zero `duration`, one span) of the worst-case timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    /// When it happens (a span: when it starts), from the stop signal E1.
    pub at: Duration,
    /// How long it lasts; zero for a moment. Spans with no bound (the normal drain with a
    /// zero request timeout) have zero length and say so in their label.
    pub duration: Duration,
    /// A short tag: `E1`, `E2`, `E3`, `P0`, `P1`…, `LB`, `EXIT`, …
    pub tag: String,
    /// What happens, for people.
    pub label: String,
    /// What it is, for programs.
    pub kind: EventKind,
}

impl TimelineEvent {
    /// When it ends: `at + duration` (saturating).
    #[must_use]
    pub fn end(&self) -> Duration {
        self.at.saturating_add(self.duration)
    }
}

/// With more failing probes than this, the timeline lists the first
/// [`LISTED_PROBES_HEAD`] and the last [`LISTED_PROBES_TAIL`] and one
/// [`EventKind::ProbesFail`] span for those between.
pub const MAX_LISTED_PROBES: u32 = 10;

/// Failing probes listed one by one at the start of a long run; see [`MAX_LISTED_PROBES`].
pub const LISTED_PROBES_HEAD: u32 = 5;

/// Failing probes listed one by one at the end of a long run; see [`MAX_LISTED_PROBES`].
pub const LISTED_PROBES_TAIL: u32 = 2;

/// Builds the worst-case timeline; the times were computed (and checked) by
/// [`plan`](super::plan()).
pub(super) fn timeline(
    input: &PlanInput,
    detection: Duration,
    e3: Duration,
    normal_drain: Option<Duration>,
    drained_at: Option<Duration>,
    total: Option<Duration>,
) -> Result<Vec<TimelineEvent>, PlanError> {
    let probes = &input.probes;
    let config = &input.config;
    let mode = config.mode();
    let delay = config.shutdown_delay();
    let hooks = input.pre_shutdown_hooks;
    let grace = config.shutdown_watch_termination_grace_period();
    let mut events = Vec::new();
    let mut push = |at: Duration, duration: Duration, tag: &str, label: String, kind| {
        events.push(TimelineEvent {
            at,
            duration,
            tag: String::from(tag),
            label,
            kind,
        });
    };
    let z = Duration::ZERO;

    push(
        z,
        z,
        "E1",
        String::from("stop signal (SIGTERM): ShutdownInitiated"),
        EventKind::Signal,
    );
    push(
        z,
        z,
        "E2",
        String::from("/readyz turns red (500); requests are still served"),
        EventKind::ReadinessRed,
    );
    push(
        z,
        z,
        "P0",
        String::from("last successful probe, answered just before E2"),
        EventKind::ProbeOk,
    );
    push(
        z,
        delay,
        "LD",
        format!(
            "lame-duck window (shutdown delay {}): /readyz red, requests served",
            GoDuration(delay)
        ),
        EventKind::LameDuck,
    );
    if !hooks.is_zero() {
        push(
            z,
            hooks,
            "HK",
            format!(
                "pre-shutdown hooks run (at most {}); PreShutdownHooksStopped at the end",
                GoDuration(hooks)
            ),
            EventKind::PreShutdownHooks,
        );
    }
    let threshold = probes.unhealthy_threshold;
    let listed = |index: u32| {
        index <= LISTED_PROBES_HEAD || index > threshold.saturating_sub(LISTED_PROBES_TAIL)
    };
    let mut index = 1;
    while index <= threshold {
        let start = mul(probes.interval, index)?;
        if threshold > MAX_LISTED_PROBES && !listed(index) {
            // The middle of a long run of failing probes, as one span.
            let last = threshold.saturating_sub(LISTED_PROBES_TAIL);
            let end = add(mul(probes.interval, last)?, probes.timeout)?;
            push(
                start,
                end.saturating_sub(start),
                &format!("P{index}..P{last}"),
                format!(
                    "probes {index} to {last} of {threshold} fail, one every {}",
                    GoDuration(probes.interval)
                ),
                EventKind::ProbesFail { first: index, last },
            );
            index = last.saturating_add(1);
            continue;
        }
        let fails_by = add(start, probes.timeout)?;
        push(
            start,
            probes.timeout,
            &format!("P{index}"),
            format!(
                "probe {index} of {threshold} fails (by {} at the latest)",
                GoDuration(fails_by)
            ),
            EventKind::ProbeFails { index },
        );
        match index.checked_add(1) {
            Some(next) => index = next,
            None => break,
        }
    }
    if !probes.propagation_delay.is_zero() {
        push(
            detection.saturating_sub(probes.propagation_delay),
            probes.propagation_delay,
            "PD",
            format!(
                "propagation delay {}: the decision reaches the data path",
                GoDuration(probes.propagation_delay)
            ),
            EventKind::Propagation,
        );
    }
    push(
        detection,
        z,
        "LB",
        format!(
            "out of service: no new requests from the load balancer (worst case, t = {})",
            GoDuration(detection)
        ),
        EventKind::OutOfService,
    );
    let e3_label = match mode {
        ShutdownMode::CloseListener => "NotAcceptingNewRequest: the listener closes",
        ShutdownMode::SendRetryAfter => "NotAcceptingNewRequest: new requests get 429",
    };
    let e3_label = if hooks > delay {
        format!("{e3_label} (at the latest; after the hooks)")
    } else {
        String::from(e3_label)
    };
    push(e3, z, "E3", e3_label, EventKind::StopAccepting);
    match normal_drain {
        Some(normal) => push(
            e3,
            normal,
            "DN",
            format!(
                "drain of normal requests (at most the request timeout {})",
                GoDuration(config.request_timeout()),
            ),
            EventKind::NormalDrain,
        ),
        None => push(
            e3,
            z,
            "DN",
            String::from("drain of normal requests: no bound (--request-timeout 0)"),
            EventKind::NormalDrain,
        ),
    }
    if !grace.is_zero() {
        push(
            e3,
            grace,
            "DW",
            format!(
                "long-running requests end at a paced rate (at most {})",
                GoDuration(grace)
            ),
            EventKind::LongRunningDrain,
        );
    }
    if let Some(drained) = drained_at {
        push(
            drained,
            z,
            "DR",
            String::from("InFlightRequestsDrained (at the latest)"),
            EventKind::Drained,
        );
        if mode == ShutdownMode::SendRetryAfter {
            push(
                drained,
                z,
                "SL",
                String::from("the listener closes: HTTPServerStoppedListening"),
                EventKind::StopListening,
            );
            push(
                drained,
                MODE_B_HTTP_SHUTDOWN_TIMEOUT,
                "HS",
                format!(
                    "HTTP server shutdown (at most {})",
                    GoDuration(MODE_B_HTTP_SHUTDOWN_TIMEOUT)
                ),
                EventKind::HttpShutdown,
            );
        }
    }
    if let Some(total) = total {
        push(
            total,
            z,
            "EXIT",
            String::from("the process exits (at the latest)"),
            EventKind::Exit,
        );
    }
    if let Some(budget) = input.termination_grace_period {
        push(
            budget,
            z,
            "KILL",
            format!(
                "SIGKILL if still running: terminationGracePeriodSeconds ({}) ends",
                GoDuration(budget)
            ),
            EventKind::Kill,
        );
    }
    // Stable: ties keep the causal order they were pushed in.
    events.sort_by_key(|e| e.at);
    Ok(events)
}
