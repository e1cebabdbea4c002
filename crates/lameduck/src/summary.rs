//! The one-line account of a termination a driver logs at the exit: why the server stopped,
//! how long each stage took, how many requests drained and streams ended, how many requests
//! were turned away, and the exit code.
//!
//! A driver feeds a [`TerminationSummary`] the inputs it hands the machine
//! ([`TerminationSummary::observe_input`]) and the events the machine emits
//! ([`TerminationSummary::observe`]), then, at [`Event::Exit`], takes the
//! [`SummaryRecord`] and logs it after [`SUMMARY_MARKER`]:
//!
//! ```text
//! [graceful-termination] termination summary: cause=signal signal_to_exit=1.503s lame_duck=0.500s normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 streams_ended=0 streams_remaining=0 rejected=4 rejected_not_accepting=0 rejected_retry_after=4 rejected_request_timeout=0 rejected_routes_not_ready=0 last_new_connection=0.120s last_new_request=0.380s late_connections=0 late_requests=4 requests_before_ready=0 readyz_probe_interval=1.000s failed_readyz_probes=0 websocket_closes=0 websocket_unanswered=0 connections_cut=0 last_connection_closed=1.504s code=0
//! ```
//!
//! Durations are seconds with three decimals and an `s`; `-` stands for a stage that did not
//! happen (or, for `last_new_connection` and `last_new_request`, for no arrival after the
//! signal, for `readyz_probe_interval`, for fewer than two `/readyz` requests before it, and
//! for `last_connection_closed`, for no connection closed after the signal).
//! The arrival fields are those of [`ArrivalCounts`], the WebSocket ones those of
//! [`GoodbyeCounts`], `connections_cut` and `last_connection_closed` those of [`PeerCounts`]
//! (connections closed at their bound with their peers silent, every kind together). [`SummaryRecord::parse_line`] reads such
//! a line back (tests compare its numbers with what they sent).

use core::fmt;
use core::time::Duration;

use crate::machine::{Event, HookKind, Input, StopSource};
use crate::rejections::{RejectionCounts, RejectionReason};
use crate::shared::counters::{ArrivalCounts, GoodbyeCounts, PeerCounts};
use crate::signal::LifecycleSignal;
use crate::time::Instant;

/// The text that starts the summary's message, after the
/// `trace::log::LOG_MARKER` (feature `testing`).
pub const SUMMARY_MARKER: &str = "termination summary:";

/// Why a termination started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopCause {
    /// SIGTERM or SIGINT.
    OsSignal,
    /// `request_shutdown()` from code.
    Api,
    /// A post-start hook failed or panicked.
    PostStartHookFailed,
    /// A listener stopped on its own, or a runtime cut its connections.
    ListenerFailed,
    /// The listening sockets were handed to a successor process.
    HandOver,
}

impl StopCause {
    /// The cause as logged: `signal`, `api`, `post_start_hook_failed`, `listener_failed`,
    /// `hand_over`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            StopCause::OsSignal => "signal",
            StopCause::Api => "api",
            StopCause::PostStartHookFailed => "post_start_hook_failed",
            StopCause::ListenerFailed => "listener_failed",
            StopCause::HandOver => "hand_over",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            StopCause::OsSignal,
            StopCause::Api,
            StopCause::PostStartHookFailed,
            StopCause::ListenerFailed,
            StopCause::HandOver,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

/// What a summary line says; see the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SummaryRecord {
    /// Why the termination started (`None`: it never did, or the cause was not seen).
    pub cause: Option<StopCause>,
    /// From `ShutdownInitiated` to the exit.
    pub signal_to_exit: Option<Duration>,
    /// From `ShutdownInitiated` to `NotAcceptingNewRequest`: the lame-duck window.
    pub lame_duck: Option<Duration>,
    /// From `NotAcceptingNewRequest` to the end of the normal drain.
    pub normal_drain: Option<Duration>,
    /// From `NotAcceptingNewRequest` to the end of the long-running drain (`None` when it was
    /// not waited for).
    pub long_running_drain: Option<Duration>,
    /// Normal (and tracked exempt) requests in flight at `NotAcceptingNewRequest` that were
    /// released during the drain.
    pub requests_drained: u64,
    /// Normal requests still in flight when the normal drain gave up.
    pub requests_remaining: u64,
    /// Long-running requests in flight at `NotAcceptingNewRequest` that ended during the drain.
    pub streams_ended: u64,
    /// Long-running requests still open when the long-running drain ended.
    pub streams_remaining: u64,
    /// Requests turned away, by reason.
    pub rejected: RejectionCounts,
    /// New connections and requests after the signal, late ones, and requests before ready
    /// ([`Counters::arrivals`](crate::shared::counters::Counters::arrivals) at the exit). Lines written
    /// before these fields existed read back with none.
    pub arrivals: ArrivalCounts,
    /// The WebSocket Close frames sent at the streams' turns, and how many went unanswered
    /// ([`Counters::goodbyes`](crate::shared::counters::Counters::goodbyes) at the exit). Lines
    /// written before these fields existed read back with none.
    pub goodbyes: GoodbyeCounts,
    /// Connections closed at their bound with their peers silent during the termination
    /// ([`PeerCounts::connections_cut`]). Lines written before this field existed read back
    /// with 0.
    pub connections_cut: u64,
    /// How long after `ShutdownInitiated` the last connection closed (`None`: none closed
    /// after it, or a line written before this field existed).
    pub last_connection_closed: Option<Duration>,
    /// The exit code (`None` before the exit).
    pub code: Option<u8>,
}

/// Writes `Some(d)` as seconds with three decimals (`1.503s`), `None` as `-`.
struct Secs(Option<Duration>);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("-"),
            Some(d) => write!(f, "{}.{:03}s", d.as_secs(), d.subsec_millis()),
        }
    }
}

fn parse_secs(text: &str) -> Option<Option<Duration>> {
    if text == "-" {
        return Some(None);
    }
    let (secs, millis) = text.strip_suffix('s')?.split_once('.')?;
    if millis.len() != 3 {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let millis: u64 = millis.parse().ok()?;
    Some(Some(
        Duration::from_secs(secs) + Duration::from_millis(millis),
    ))
}

impl fmt::Display for SummaryRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cause={} signal_to_exit={} lame_duck={} normal_drain={} long_running_drain={} \
             requests_drained={} requests_remaining={} streams_ended={} streams_remaining={} \
             rejected={}",
            self.cause.map_or("-", StopCause::name),
            Secs(self.signal_to_exit),
            Secs(self.lame_duck),
            Secs(self.normal_drain),
            Secs(self.long_running_drain),
            self.requests_drained,
            self.requests_remaining,
            self.streams_ended,
            self.streams_remaining,
            self.rejected.total(),
        )?;
        for reason in RejectionReason::ALL {
            write!(
                f,
                " rejected_{}={}",
                reason.name(),
                self.rejected.get(reason)
            )?;
        }
        let a = &self.arrivals;
        write!(
            f,
            " last_new_connection={} last_new_request={} late_connections={} late_requests={} \
             requests_before_ready={} readyz_probe_interval={} failed_readyz_probes={}",
            Secs(a.last_new_connection),
            Secs(a.last_new_request),
            a.late_connections,
            a.late_requests,
            a.requests_before_ready,
            Secs(a.readyz_probe_interval),
            a.failed_readyz_probes,
        )?;
        write!(
            f,
            " websocket_closes={} websocket_unanswered={}",
            self.goodbyes.websocket_closes, self.goodbyes.websocket_unanswered,
        )?;
        write!(
            f,
            " connections_cut={} last_connection_closed={}",
            self.connections_cut,
            Secs(self.last_connection_closed),
        )?;
        match self.code {
            Some(code) => write!(f, " code={code}"),
            None => f.write_str(" code=-"),
        }
    }
}

impl SummaryRecord {
    /// This record with `peers`' figures: `connections_cut` (during the termination) and
    /// `last_connection_closed`.
    #[must_use]
    pub fn with_peers(self, peers: &PeerCounts) -> Self {
        SummaryRecord {
            connections_cut: peers.connections_cut(),
            last_connection_closed: peers.last_connection_closed,
            ..self
        }
    }

    /// Reads a summary back from a log line that contains [`SUMMARY_MARKER`]; `None` when the
    /// line has no marker or a field is missing or malformed. Anything before the marker
    /// (timestamp, level, target) is ignored, and so are fields after it that are not known.
    /// The arrival, WebSocket and connection fields may be missing (lines written before they
    /// existed): they read as none.
    ///
    /// ```
    /// use lameduck::summary::SummaryRecord;
    /// use lameduck::rejections::RejectionReason;
    ///
    /// let line = "2026-11-22T05:07:33Z  INFO lameduck_hyper::server: [graceful-termination] \
    ///     termination summary: cause=signal signal_to_exit=1.503s lame_duck=0.500s \
    ///     normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 \
    ///     streams_ended=0 streams_remaining=0 rejected=4 rejected_not_accepting=0 \
    ///     rejected_retry_after=4 rejected_request_timeout=0 rejected_routes_not_ready=0 \
    ///     last_new_connection=1.900s last_new_request=- late_connections=1 late_requests=4 \
    ///     requests_before_ready=0 readyz_probe_interval=2.001s failed_readyz_probes=1 \
    ///     websocket_closes=2 websocket_unanswered=0 connections_cut=1 \
    ///     last_connection_closed=2.101s code=0";
    /// let s = SummaryRecord::parse_line(line).unwrap();
    /// assert_eq!(s.requests_drained, 3);
    /// assert_eq!(s.rejected.get(RejectionReason::RetryAfter), 4);
    /// assert_eq!(s.arrivals.late_connections, 1);
    /// assert_eq!(s.connections_cut, 1);
    /// assert_eq!(s.code, Some(0));
    /// assert_eq!(s.to_string(), line.split_once("summary: ").unwrap().1);
    /// ```
    #[must_use]
    pub fn parse_line(line: &str) -> Option<SummaryRecord> {
        let (_, rest) = line.split_once(SUMMARY_MARKER)?;
        let mut r = SummaryRecord::default();
        let mut seen = 0u32;
        let mut total = None;
        for word in rest.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            let bit = match key {
                "cause" => {
                    r.cause = StopCause::from_name(value);
                    if r.cause.is_none() && value != "-" {
                        return None;
                    }
                    1
                }
                "signal_to_exit" => {
                    r.signal_to_exit = parse_secs(value)?;
                    2
                }
                "lame_duck" => {
                    r.lame_duck = parse_secs(value)?;
                    4
                }
                "normal_drain" => {
                    r.normal_drain = parse_secs(value)?;
                    8
                }
                "long_running_drain" => {
                    r.long_running_drain = parse_secs(value)?;
                    16
                }
                "requests_drained" => {
                    r.requests_drained = value.parse().ok()?;
                    32
                }
                "requests_remaining" => {
                    r.requests_remaining = value.parse().ok()?;
                    64
                }
                "streams_ended" => {
                    r.streams_ended = value.parse().ok()?;
                    128
                }
                "streams_remaining" => {
                    r.streams_remaining = value.parse().ok()?;
                    256
                }
                "rejected" => {
                    total = Some(value.parse::<u64>().ok()?);
                    512
                }
                "last_new_connection" => {
                    r.arrivals.last_new_connection = parse_secs(value)?;
                    0
                }
                "last_new_request" => {
                    r.arrivals.last_new_request = parse_secs(value)?;
                    0
                }
                "late_connections" => {
                    r.arrivals.late_connections = value.parse().ok()?;
                    0
                }
                "late_requests" => {
                    r.arrivals.late_requests = value.parse().ok()?;
                    0
                }
                "requests_before_ready" => {
                    r.arrivals.requests_before_ready = value.parse().ok()?;
                    0
                }
                "readyz_probe_interval" => {
                    r.arrivals.readyz_probe_interval = parse_secs(value)?;
                    0
                }
                "failed_readyz_probes" => {
                    r.arrivals.failed_readyz_probes = value.parse().ok()?;
                    0
                }
                "websocket_closes" => {
                    r.goodbyes.websocket_closes = value.parse().ok()?;
                    0
                }
                "websocket_unanswered" => {
                    r.goodbyes.websocket_unanswered = value.parse().ok()?;
                    0
                }
                "connections_cut" => {
                    r.connections_cut = value.parse().ok()?;
                    0
                }
                "last_connection_closed" => {
                    r.last_connection_closed = parse_secs(value)?;
                    0
                }
                "code" => {
                    r.code = if value == "-" {
                        None
                    } else {
                        Some(value.parse().ok()?)
                    };
                    1024
                }
                _ => {
                    let reason = key.strip_prefix("rejected_").and_then(|name| {
                        RejectionReason::ALL.into_iter().find(|r| r.name() == name)
                    });
                    match reason {
                        Some(reason) => {
                            r.rejected = r.rejected.with(reason, value.parse().ok()?);
                            2048 << reason.index()
                        }
                        None => 0,
                    }
                }
            };
            seen |= bit;
        }
        let all = (2048 << RejectionReason::ALL.len()) - 1;
        (seen == all && total == Some(r.rejected.total())).then_some(r)
    }
}

/// Builds a [`SummaryRecord`] from what a driver sees; see the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct TerminationSummary {
    cause: Option<StopCause>,
    initiated: Option<Instant>,
    not_accepting: Option<Instant>,
    record: SummaryRecord,
    normal_at_start: usize,
    long_running_at_start: usize,
}

impl TerminationSummary {
    /// An empty summary.
    #[must_use]
    pub fn new() -> Self {
        TerminationSummary::default()
    }

    /// Notes an input the driver hands the machine (only stop requests matter).
    pub fn observe_input(&mut self, input: &Input) {
        if let Input::StopRequested(source) = input {
            self.note_cause(match source {
                StopSource::OsSignal => StopCause::OsSignal,
                StopSource::Api => StopCause::Api,
            });
        }
    }

    /// Notes an event of the machine, handled at `now`. `hook_kind` names the kind of a
    /// failed hook (the machine's [`Machine::hook_kind`](crate::Machine::hook_kind)).
    pub fn observe(&mut self, event: &Event, now: Instant, hook_kind: Option<HookKind>) {
        match *event {
            Event::Signal { signal, at } => match signal {
                LifecycleSignal::ShutdownInitiated => self.initiated = Some(at),
                LifecycleSignal::NotAcceptingNewRequest => {
                    self.not_accepting = Some(at);
                    self.record.lame_duck = self.since_initiated(at);
                }
                _ => {}
            },
            Event::HookFailed { .. } if hook_kind == Some(HookKind::PostStart) => {
                self.note_cause(StopCause::PostStartHookFailed);
            }
            Event::ListenerFailed(_) | Event::ConnectionsCut(_) => {
                self.note_cause(StopCause::ListenerFailed);
            }
            Event::HandedOver => self.note_cause(StopCause::HandOver),
            Event::DrainStarted(plan) => {
                self.normal_at_start = plan.normal_in_flight;
                self.long_running_at_start = plan.long_running_in_flight;
            }
            Event::NormalDrainFinished { remaining, .. } => {
                self.record.normal_drain = self.since_not_accepting(now);
                self.record.requests_remaining = remaining as u64;
                self.record.requests_drained =
                    self.normal_at_start.saturating_sub(remaining) as u64;
            }
            Event::LongRunningDrainFinished {
                before,
                after,
                skipped,
                ..
            } => {
                if !skipped {
                    self.record.long_running_drain = self.since_not_accepting(now);
                }
                self.record.streams_remaining = after as u64;
                self.record.streams_ended = before.saturating_sub(after) as u64;
            }
            Event::Exit { code, .. } => {
                self.record.code = Some(code);
                self.record.signal_to_exit = self.since_initiated(now);
            }
            _ => {}
        }
    }

    /// The summary so far, with `rejected` and `arrivals` (read from
    /// [`Counters::rejections`](crate::shared::counters::Counters::rejections) and
    /// [`Counters::arrivals`](crate::shared::counters::Counters::arrivals) at the exit).
    #[must_use]
    pub fn record(&self, rejected: RejectionCounts, arrivals: ArrivalCounts) -> SummaryRecord {
        SummaryRecord {
            cause: self.cause,
            rejected,
            arrivals,
            ..self.record
        }
    }

    /// [`TerminationSummary::record`] with all of `shared`'s counts: rejections, arrivals,
    /// WebSocket goodbyes and the connections cut at their bound.
    #[must_use]
    pub fn record_shared(&self, shared: &crate::Shared) -> SummaryRecord {
        let counters = shared.counters();
        SummaryRecord {
            goodbyes: counters.goodbyes(),
            ..self.record(counters.rejections(), counters.arrivals())
        }
        .with_peers(&counters.peer_counts())
    }

    /// When `ShutdownInitiated` fired, if it has.
    #[must_use]
    pub fn initiated_at(&self) -> Option<Instant> {
        self.initiated
    }

    /// The time from `ShutdownInitiated` to `now`, if it has fired.
    #[must_use]
    pub fn since_initiated(&self, now: Instant) -> Option<Duration> {
        self.initiated.map(|at| now.saturating_duration_since(at))
    }

    fn since_not_accepting(&self, now: Instant) -> Option<Duration> {
        self.not_accepting
            .map(|at| now.saturating_duration_since(at))
    }

    /// The first cause wins; nothing after `ShutdownInitiated` changes it.
    fn note_cause(&mut self, cause: StopCause) {
        if self.cause.is_none() && self.initiated.is_none() {
            self.cause = Some(cause);
        }
    }
}

#[cfg(test)]
mod tests;
