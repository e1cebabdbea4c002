//! The lifecycle's metrics, through the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`).
//!
//! The application picks the exporter (`metrics-exporter-prometheus`, say) and installs it as
//! the global recorder; lameduck only records. Nothing here runs per request: the driver
//! records at lifecycle events (a signal firing, a drain tick, a hook ending, the exit), and
//! the application calls [`record_state`] when it is scraped, which reads the gate's counters
//! and the rejection counts out of [`Shared`]. With no recorder installed every call here
//! finds the no-op recorder and does nothing.
//!
//! Every series, with its type, labels and meaning, is in [`SERIES`] (and in the repository's
//! `docs/metrics.md`, with example alerts); [`describe`] registers their help texts.
//!
//! ```
//! # fn scrape(render: impl Fn() -> String) -> String { render() }
//! use std::sync::Arc;
//! use lameduck::{Config, Lifecycle};
//!
//! let shared = Arc::clone(Lifecycle::new(Config::default()).prepare().shared());
//! lameduck::metrics::describe();
//! // In the `/metrics` handler, before the exporter renders its text:
//! lameduck::metrics::record_state(&shared);
//! ```

use core::time::Duration;

use ::metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

use crate::machine::{HookKind, HookOutcome};
use crate::phase::Phase;
use crate::rejections::RejectionReason;
use crate::shared::Shared;
use crate::signal::LifecycleSignal;
use crate::summary::SummaryRecord;

/// The type of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeriesKind {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (`_total`).
    Counter,
}

/// One series lameduck records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Series {
    /// The metric name.
    pub name: &'static str,
    /// Gauge or counter.
    pub kind: SeriesKind,
    /// The label names.
    pub labels: &'static [&'static str],
    /// The unit, when it has one.
    pub unit: Option<Unit>,
    /// What it means.
    pub help: &'static str,
}

/// `lameduck_phase{phase}`: 1 for the current phase, 0 for the others.
pub const PHASE: &str = "lameduck_phase";
/// `lameduck_in_flight_requests{class}`: requests admitted and not yet finished.
pub const IN_FLIGHT: &str = "lameduck_in_flight_requests";
/// `lameduck_rejected_requests_total{reason}`: requests turned away.
pub const REJECTED: &str = "lameduck_rejected_requests_total";
/// `lameduck_requests_served_after_close_total`: requests served after the gate closed.
pub const SERVED_AFTER_CLOSE: &str = "lameduck_requests_served_after_close_total";
/// `lameduck_signal_fired{signal}`: 1 once the signal has fired.
pub const SIGNAL_FIRED: &str = "lameduck_signal_fired";
/// `lameduck_signal_timestamp_seconds{signal}`: when the signal fired, Unix time.
pub const SIGNAL_TIMESTAMP: &str = "lameduck_signal_timestamp_seconds";
/// `lameduck_drain_duration_seconds{class}`: how long a drain took.
pub const DRAIN_DURATION: &str = "lameduck_drain_duration_seconds";
/// `lameduck_drain_remaining_requests{class}`: requests the drain still waits for.
pub const DRAIN_REMAINING: &str = "lameduck_drain_remaining_requests";
/// `lameduck_hook_runs_total{kind,hook,outcome}`: hooks that ended, by outcome.
pub const HOOK_RUNS: &str = "lameduck_hook_runs_total";
/// `lameduck_termination_budget_seconds`: the longest a termination should take.
pub const TERMINATION_BUDGET: &str = "lameduck_termination_budget_seconds";
/// `lameduck_termination_duration_seconds`: from `ShutdownInitiated` to the exit.
pub const TERMINATION_DURATION: &str = "lameduck_termination_duration_seconds";

/// `lameduck_last_new_arrival_seconds{kind}`: from `ShutdownInitiated` to the latest new
/// connection or request before `NotAcceptingNewRequest`.
pub const LAST_NEW_ARRIVAL: &str = "lameduck_last_new_arrival_seconds";
/// `lameduck_late_arrivals_total{kind}`: connections and requests that arrived late.
pub const LATE_ARRIVALS: &str = "lameduck_late_arrivals_total";
/// `lameduck_requests_before_ready_total`: requests while `/readyz` said "not ready".
pub const REQUESTS_BEFORE_READY: &str = "lameduck_requests_before_ready_total";
/// `lameduck_readyz_probe_interval_seconds`: the time between the last two `/readyz`
/// requests before `ShutdownInitiated`.
pub const READYZ_PROBE_INTERVAL: &str = "lameduck_readyz_probe_interval_seconds";
/// `lameduck_failed_readyz_probes_total`: `/readyz` answered "not ready" after
/// `ShutdownInitiated`.
pub const FAILED_READYZ_PROBES: &str = "lameduck_failed_readyz_probes_total";
/// `lameduck_websocket_closes_total{answered}`: WebSocket Close frames (1001) sent at the
/// sockets' turns, by whether the client answered.
pub const WEBSOCKET_CLOSES: &str = "lameduck_websocket_closes_total";
/// `lameduck_connections_cut_total{kind}`: connections closed at their bound with their peers
/// silent ([`CutKind`](crate::connection::CutKind)).
pub const CONNECTIONS_CUT: &str = "lameduck_connections_cut_total";
/// `lameduck_last_connection_closed_seconds`: from `ShutdownInitiated` to the latest
/// connection close.
pub const LAST_CONNECTION_CLOSED: &str = "lameduck_last_connection_closed_seconds";

/// Every series lameduck records.
pub const SERIES: &[Series] = &[
    Series {
        name: PHASE,
        kind: SeriesKind::Gauge,
        labels: &["phase"],
        unit: None,
        help: "1 for the lifecycle's current phase (prepared, starting, serving, lame_duck, draining, stopping, exited), 0 for the others.",
    },
    Series {
        name: IN_FLIGHT,
        kind: SeriesKind::Gauge,
        labels: &["class"],
        unit: None,
        help: "Requests admitted and not yet finished, by class (normal, long_running); tracked health and metrics requests count as normal.",
    },
    Series {
        name: REJECTED,
        kind: SeriesKind::Counter,
        labels: &["reason"],
        unit: None,
        help: "Requests turned away, by reason: not_accepting (503 after the gate closed), retry_after (429 in retry-after mode), request_timeout (504 or aborted at the request timeout), routes_not_ready (503 before every route is installed).",
    },
    Series {
        name: SERVED_AFTER_CLOSE,
        kind: SeriesKind::Counter,
        labels: &[],
        unit: None,
        help: "Requests served after the gate closed because their connection could not turn them away cleanly: HTTP/2 streams that arrived before the final GOAWAY, and requests on kept-alive connections when the listening sockets outlive the process.",
    },
    Series {
        name: SIGNAL_FIRED,
        kind: SeriesKind::Gauge,
        labels: &["signal"],
        unit: None,
        help: "1 once the lifecycle signal has fired, 0 before.",
    },
    Series {
        name: SIGNAL_TIMESTAMP,
        kind: SeriesKind::Gauge,
        labels: &["signal"],
        unit: Some(Unit::Seconds),
        help: "When the lifecycle signal fired, in seconds since the Unix epoch; absent until it fires.",
    },
    Series {
        name: DRAIN_DURATION,
        kind: SeriesKind::Gauge,
        labels: &["class"],
        unit: Some(Unit::Seconds),
        help: "From NotAcceptingNewRequest to the end of the drain of that class (normal, long_running); absent until that drain ends.",
    },
    Series {
        name: DRAIN_REMAINING,
        kind: SeriesKind::Gauge,
        labels: &["class"],
        unit: None,
        help: "Requests of that class the drain still waits for, updated while draining; after the drain, those it gave up on.",
    },
    Series {
        name: HOOK_RUNS,
        kind: SeriesKind::Counter,
        labels: &["kind", "hook", "outcome"],
        unit: None,
        help: "Hooks that ended, by kind (post-start, pre-shutdown, after-drain, destroy), name and outcome (succeeded, failed, panicked).",
    },
    Series {
        name: TERMINATION_BUDGET,
        kind: SeriesKind::Gauge,
        labels: &[],
        unit: Some(Unit::Seconds),
        help: "The longest a termination should take with this configuration: shutdown delay + max(request timeout, long-running grace period), + the 2 s HTTP shutdown timeout in retry-after mode (pre-shutdown hooks longer than the delay and destroy hooks not counted); +Inf with no request timeout.",
    },
    Series {
        name: LAST_NEW_ARRIVAL,
        kind: SeriesKind::Gauge,
        labels: &["kind"],
        unit: Some(Unit::Seconds),
        help: "From ShutdownInitiated to the latest new connection or request (kind: connection, request) that arrived before NotAcceptingNewRequest; absent until one arrives after the signal. Close to the shutdown delay means the load balancer barely stopped in time.",
    },
    Series {
        name: LATE_ARRIVALS,
        kind: SeriesKind::Counter,
        labels: &["kind"],
        unit: None,
        help: "Connections and requests (kind) that arrived in the last part of the shutdown delay (20 % by default), or were turned away after it. Late connections mean the load balancer stopped sending new traffic too late: raise the shutdown delay or make its readiness check fail sooner.",
    },
    Series {
        name: REQUESTS_BEFORE_READY,
        kind: SeriesKind::Counter,
        labels: &[],
        unit: None,
        help: "Requests (health and metrics aside) that arrived after /readyz answered not ready and before it first answered ready: the load balancer does not honour the readiness probe.",
    },
    Series {
        name: READYZ_PROBE_INTERVAL,
        kind: SeriesKind::Gauge,
        labels: &[],
        unit: Some(Unit::Seconds),
        help: "The time between the last two /readyz requests before ShutdownInitiated: the load balancer's probe period as the server sees it (shorter when several probers interleave); absent until two arrived.",
    },
    Series {
        name: FAILED_READYZ_PROBES,
        kind: SeriesKind::Counter,
        labels: &[],
        unit: None,
        help: "/readyz requests answered not ready after ShutdownInitiated: with late connections, the failed probes the load balancer ignored (its failure threshold is higher).",
    },
    Series {
        name: WEBSOCKET_CLOSES,
        kind: SeriesKind::Counter,
        labels: &["answered"],
        unit: None,
        help: "WebSocket Close frames (status 1001) sent at the sockets' turns in the drain, by whether the client answered with its Close (answered=false: cut at the bound, or still silent).",
    },
    Series {
        name: CONNECTIONS_CUT,
        kind: SeriesKind::Counter,
        labels: &["kind"],
        unit: None,
        help: "Connections closed at their bound with their peers silent, by kind: tls_handshake (not complete a second after the stop), request_head (no complete request head), http2_goaway (neither acknowledged the GOAWAY nor closed), unread_response (the client stopped reading a response past its bound), websocket_close (never answered the Close), max_connection_age (streams outlasted the age grace).",
    },
    Series {
        name: LAST_CONNECTION_CLOSED,
        kind: SeriesKind::Gauge,
        labels: &[],
        unit: Some(Unit::Seconds),
        help: "From ShutdownInitiated to the latest connection close; absent until a connection closed after it.",
    },
    Series {
        name: TERMINATION_DURATION,
        kind: SeriesKind::Gauge,
        labels: &[],
        unit: Some(Unit::Seconds),
        help: "From ShutdownInitiated to the exit; set at the exit (seen by exporters that push or flush in an after-drain or destroy hook).",
    },
];

/// Registers the help text and unit of every series in [`SERIES`] with the installed
/// recorder. Call it once, after installing the recorder.
pub fn describe() {
    for s in SERIES {
        match (s.kind, s.unit) {
            (SeriesKind::Gauge, Some(unit)) => describe_gauge!(s.name, unit, s.help),
            (SeriesKind::Gauge, None) => describe_gauge!(s.name, s.help),
            (SeriesKind::Counter, Some(unit)) => describe_counter!(s.name, unit, s.help),
            (SeriesKind::Counter, None) => describe_counter!(s.name, s.help),
        }
    }
}

/// The `phase` label of a phase.
#[must_use]
pub const fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Configuring => "configuring",
        Phase::Prepared => "prepared",
        Phase::Starting => "starting",
        Phase::Serving => "serving",
        Phase::LameDuck => "lame_duck",
        Phase::Draining => "draining",
        Phase::Stopping => "stopping",
        Phase::Exited => "exited",
    }
}

/// The phases [`PHASE`] reports (every phase a prepared lifecycle can be in).
const PHASES: [Phase; 7] = [
    Phase::Prepared,
    Phase::Starting,
    Phase::Serving,
    Phase::LameDuck,
    Phase::Draining,
    Phase::Stopping,
    Phase::Exited,
];

/// Records the state `shared` shows now: the phase, the requests in flight, whether each
/// signal has fired, the rejection counts and the termination budget. Call it before the
/// exporter renders a scrape; the driver also calls it at every lifecycle event.
pub fn record_state(shared: &Shared) {
    let phase = shared.phase();
    for p in PHASES {
        gauge!(PHASE, "phase" => phase_label(p)).set(f64::from(u8::from(p == phase)));
    }
    let gate = shared.gate();
    gauge!(IN_FLIGHT, "class" => "normal").set(gate.normal_in_flight() as f64);
    gauge!(IN_FLIGHT, "class" => "long_running").set(gate.long_running_in_flight() as f64);
    let fired = shared.fired();
    for signal in LifecycleSignal::ALL {
        gauge!(SIGNAL_FIRED, "signal" => signal.name())
            .set(f64::from(u8::from(fired.contains(signal))));
    }
    let counters = shared.counters();
    let rejected = counters.rejections();
    for reason in RejectionReason::ALL {
        counter!(REJECTED, "reason" => reason.name()).absolute(rejected.get(reason));
    }
    counter!(SERVED_AFTER_CLOSE).absolute(counters.served_after_close());
    let arrivals = counters.arrivals();
    for (kind, last) in [
        ("connection", arrivals.last_new_connection),
        ("request", arrivals.last_new_request),
    ] {
        if let Some(d) = last {
            gauge!(LAST_NEW_ARRIVAL, "kind" => kind).set(d.as_secs_f64());
        }
    }
    counter!(LATE_ARRIVALS, "kind" => "connection").absolute(arrivals.late_connections);
    counter!(LATE_ARRIVALS, "kind" => "request").absolute(arrivals.late_requests);
    counter!(REQUESTS_BEFORE_READY).absolute(arrivals.requests_before_ready);
    if let Some(d) = arrivals.readyz_probe_interval {
        gauge!(READYZ_PROBE_INTERVAL).set(d.as_secs_f64());
    }
    counter!(FAILED_READYZ_PROBES).absolute(arrivals.failed_readyz_probes);
    let goodbyes = counters.goodbyes();
    let answered = goodbyes.websocket_closes - goodbyes.websocket_unanswered;
    counter!(WEBSOCKET_CLOSES, "answered" => "true").absolute(answered);
    counter!(WEBSOCKET_CLOSES, "answered" => "false").absolute(goodbyes.websocket_unanswered);
    let peers = counters.peer_counts();
    for kind in crate::connection::CutKind::ALL {
        counter!(CONNECTIONS_CUT, "kind" => kind.name())
            .absolute(peers.cut_since_start[kind.index()]);
    }
    if let Some(d) = peers.last_connection_closed {
        gauge!(LAST_CONNECTION_CLOSED).set(d.as_secs_f64());
    }
    gauge!(TERMINATION_BUDGET)
        .set(termination_budget(shared.config()).map_or(f64::INFINITY, |d| d.as_secs_f64()));
}

/// The longest a termination should take with `config` (see [`TERMINATION_BUDGET`]);
/// `None` when the request timeout is 0 (unbounded).
#[must_use]
pub fn termination_budget(config: &crate::Config) -> Option<Duration> {
    if config.request_timeout().is_zero() {
        return None;
    }
    let drain = config
        .request_timeout()
        .max(config.shutdown_watch_termination_grace_period());
    let after_drain = match config.mode() {
        crate::ShutdownMode::CloseListener => Duration::ZERO,
        crate::ShutdownMode::SendRetryAfter => config.http_shutdown_timeout(),
    };
    Some(
        config
            .shutdown_delay()
            .saturating_add(drain)
            .saturating_add(after_drain),
    )
}

/// Records that `signal` fired at `unix_seconds` (seconds since the Unix epoch).
pub fn record_signal(signal: LifecycleSignal, unix_seconds: f64) {
    gauge!(SIGNAL_FIRED, "signal" => signal.name()).set(1.0);
    gauge!(SIGNAL_TIMESTAMP, "signal" => signal.name()).set(unix_seconds);
}

/// Records the requests a drain still waits for.
pub fn record_drain_remaining(normal: usize, long_running: usize) {
    gauge!(DRAIN_REMAINING, "class" => "normal").set(normal as f64);
    gauge!(DRAIN_REMAINING, "class" => "long_running").set(long_running as f64);
}

/// Records what a termination summary knows so far: the drain durations and what they left
/// behind, and at the exit the termination's duration.
pub fn record_summary(summary: &SummaryRecord) {
    if let Some(d) = summary.normal_drain {
        gauge!(DRAIN_DURATION, "class" => "normal").set(d.as_secs_f64());
        gauge!(DRAIN_REMAINING, "class" => "normal").set(summary.requests_remaining as f64);
    }
    if let Some(d) = summary.long_running_drain {
        gauge!(DRAIN_DURATION, "class" => "long_running").set(d.as_secs_f64());
        gauge!(DRAIN_REMAINING, "class" => "long_running").set(summary.streams_remaining as f64);
    }
    if let (Some(d), Some(_)) = (summary.signal_to_exit, summary.code) {
        gauge!(TERMINATION_DURATION).set(d.as_secs_f64());
    }
}

/// The `outcome` label of a hook outcome.
#[must_use]
pub const fn outcome_label(outcome: HookOutcome) -> &'static str {
    match outcome {
        HookOutcome::Succeeded => "succeeded",
        HookOutcome::Failed => "failed",
        HookOutcome::Panicked => "panicked",
    }
}

/// Records that the hook `hook` of `kind` ended with `outcome`.
pub fn record_hook(kind: HookKind, hook: &str, outcome: HookOutcome) {
    counter!(
        HOOK_RUNS,
        "kind" => kind.name(),
        "hook" => alloc::string::String::from(hook),
        "outcome" => outcome_label(outcome)
    )
    .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn budgets() {
        let c = Config::builder()
            .shutdown_delay(Duration::from_secs(5))
            .request_timeout(Duration::from_secs(10))
            .shutdown_watch_termination_grace_period(Duration::from_secs(30))
            .build()
            .unwrap();
        assert_eq!(termination_budget(&c), Some(Duration::from_secs(35)));
        let b = c
            .to_builder()
            .shutdown_send_retry_after(true)
            .build()
            .unwrap();
        assert_eq!(termination_budget(&b), Some(Duration::from_secs(37)));
        let u = c
            .to_builder()
            .request_timeout(Duration::ZERO)
            .build()
            .unwrap();
        assert_eq!(termination_budget(&u), None);
    }

    #[test]
    fn every_series_is_named_by_the_conventions() {
        for s in SERIES {
            assert!(s.name.starts_with("lameduck_"), "{}", s.name);
            assert_eq!(s.kind == SeriesKind::Counter, s.name.ends_with("_total"));
            assert_eq!(s.unit == Some(Unit::Seconds), s.name.ends_with("_seconds"));
        }
        // Recording with no recorder installed does nothing, and does not fail.
        record_signal(LifecycleSignal::ShutdownInitiated, 1.0);
        record_hook(HookKind::PreShutdown, "h", HookOutcome::Succeeded);
        describe();
    }
}
