//! The reference model: is an observed sequence of lifecycle events legal?
//!
//! [`check_trace`] takes the events a service was seen to produce (from its logs, from a
//! test harness, or from a [`Machine`](crate::Machine) via [`TracedEvent::from_event`]) and
//! says whether the lifecycle DAG (the repository's `docs/design.md#dag`) allows that sequence
//! for the given configuration, or names the [`Rule`] it breaks. A trace may stop early (a
//! prefix of a legal run is legal); [`TraceSummary::complete`] says whether it reached an exit.
//!
//! To check a real server's log, `log::parse_log` (feature `testing`) reads the lifecycle's log
//! lines into the events `check_trace` takes; its docs show the whole check in a test.

use core::fmt;
use core::time::Duration;

use crate::config::{Config, ShutdownMode};
use crate::machine::Event;
use crate::signal::{LifecycleSignal, SignalSet};
use crate::time::Instant;

#[cfg(feature = "testing")]
pub mod log;

/// One observable event of a lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A signal fired.
    Signal(LifecycleSignal),
    /// The listeners were told to stop (optional in a trace: logs need not show it).
    StopListening,
    /// The listening sockets were handed to a ready successor, which starts the termination.
    HandedOver,
    /// The process exited with this code.
    Exit(u8),
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEvent::Signal(s) => f.write_str(s.name()),
            TraceEvent::StopListening => f.write_str("StopListening"),
            TraceEvent::HandedOver => f.write_str("HandedOver"),
            TraceEvent::Exit(code) => write!(f, "Exit({code})"),
        }
    }
}

/// An event and, when known, when it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TracedEvent {
    /// What happened.
    pub event: TraceEvent,
    /// When, on the observer's monotonic clock (all events of a trace on the same clock).
    pub at: Option<Instant>,
}

impl TracedEvent {
    /// An event with no time.
    #[must_use]
    pub const fn untimed(event: TraceEvent) -> Self {
        TracedEvent { event, at: None }
    }

    /// An event at `at`.
    #[must_use]
    pub const fn at(event: TraceEvent, at: Instant) -> Self {
        TracedEvent {
            event,
            at: Some(at),
        }
    }

    /// The trace event of a machine output observed at `now`, if it is one.
    #[must_use]
    pub fn from_event(event: &Event, now: Instant) -> Option<Self> {
        match *event {
            Event::Signal { signal, at } => Some(Self::at(TraceEvent::Signal(signal), at)),
            Event::StopListening { .. } => Some(Self::at(TraceEvent::StopListening, now)),
            Event::HandedOver => Some(Self::at(TraceEvent::HandedOver, now)),
            Event::Exit { code, .. } => Some(Self::at(TraceEvent::Exit(code), now)),
            _ => None,
        }
    }
}

/// A rule of the lifecycle DAG (the repository's `docs/design.md#dag`) that a trace can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Nothing happens after the process exited.
    NothingAfterExit,
    /// Each signal fires at most once.
    SignalFiresOnce(LifecycleSignal),
    /// A signal fired before one of its DAG predecessors.
    Predecessor {
        /// The signal (or `StopListening`, as `None`) that came too early.
        event: Option<LifecycleSignal>,
        /// What it must follow.
        needs: LifecycleSignal,
    },
    /// Listeners are stopped once.
    StopListeningOnce,
    /// `HTTPServerStoppedListening` must follow `StopListening` when the trace shows it.
    StoppedListeningBeforeStop,
    /// `MuxAndDiscoveryComplete` never fires once shutdown has been initiated.
    MuxCompleteAfterShutdown,
    /// `/readyz` fails from `ShutdownInitiated` on, so `HasBeenReady` cannot fire after it.
    ReadyAfterShutdown,
    /// Exit 0 only after `InFlightRequestsDrained` and `HTTPServerStoppedListening`.
    CleanExitBeforeDone,
    /// Exit codes are 0 or 1.
    ExitCode,
    /// Timestamps never go back.
    TimeGoesBack,
    /// The listeners are handed over at most once.
    HandOverOnce,
    /// A hand-over starts the termination, so it comes before `ShutdownInitiated`.
    HandOverAfterShutdown,
    /// `AfterShutdownDelayDuration` came sooner than `shutdown_delay` after
    /// `ShutdownInitiated`.
    DelayTooShort {
        /// The configured delay.
        expected: Duration,
        /// What the trace shows.
        observed: Duration,
    },
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::NothingAfterExit => f.write_str("nothing may happen after the process exited"),
            Rule::SignalFiresOnce(s) => write!(f, "{s} fired more than once"),
            Rule::Predecessor {
                event: Some(s),
                needs,
            } => write!(f, "{s} fired before {needs}"),
            Rule::Predecessor { event: None, needs } => {
                write!(f, "listeners were stopped before {needs}")
            }
            Rule::StopListeningOnce => f.write_str("listeners were stopped twice"),
            Rule::StoppedListeningBeforeStop => {
                f.write_str("HTTPServerStoppedListening fired before the listeners were stopped")
            }
            Rule::MuxCompleteAfterShutdown => {
                f.write_str("MuxAndDiscoveryComplete fired after ShutdownInitiated")
            }
            Rule::ReadyAfterShutdown => f.write_str("HasBeenReady fired after ShutdownInitiated"),
            Rule::CleanExitBeforeDone => f.write_str(
                "exit 0 before both InFlightRequestsDrained and HTTPServerStoppedListening",
            ),
            Rule::ExitCode => f.write_str("exit code other than 0 or 1"),
            Rule::TimeGoesBack => f.write_str("an event is timed before the one preceding it"),
            Rule::HandOverOnce => f.write_str("the listeners were handed over twice"),
            Rule::HandOverAfterShutdown => {
                f.write_str("the listeners were handed over after ShutdownInitiated")
            }
            Rule::DelayTooShort { expected, observed } => write!(
                f,
                "AfterShutdownDelayDuration came {observed:?} after ShutdownInitiated, \
                 sooner than the shutdown delay of {expected:?}"
            ),
        }
    }
}

/// Where and how a trace breaks the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event #{index} ({event}) breaks a rule: {rule}")]
pub struct Violation {
    /// The index of the offending event.
    pub index: usize,
    /// The offending event.
    pub event: TraceEvent,
    /// The rule it breaks.
    pub rule: Rule,
}

/// What a legal trace amounts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceSummary {
    /// The signals seen.
    pub signals: SignalSet,
    /// The exit code, if the trace reached an exit.
    pub exit_code: Option<u8>,
}

impl TraceSummary {
    /// Whether the trace ended in an exit.
    #[must_use]
    pub fn complete(&self) -> bool {
        self.exit_code.is_some()
    }
}

/// The DAG predecessors of `signal` in `mode`.
///
/// The machine states the same edges as the conditions under which it fires each signal.
/// They are not derived from one another on purpose: this is the independent reference a
/// machine (or another implementation's log) is checked against. The crate's
/// `tests/dag_edges.rs` checks that the two agree, edge by edge, in both modes.
#[must_use]
pub fn predecessors(signal: LifecycleSignal, mode: ShutdownMode) -> &'static [LifecycleSignal] {
    use LifecycleSignal::*;
    match signal {
        ShutdownInitiated | HasBeenReady | MuxAndDiscoveryComplete => &[],
        AfterShutdownDelayDuration | PreShutdownHooksStopped => &[ShutdownInitiated],
        NotAcceptingNewRequest => &[AfterShutdownDelayDuration, PreShutdownHooksStopped],
        InFlightRequestsDrained => &[NotAcceptingNewRequest],
        HTTPServerStoppedListening => match mode {
            ShutdownMode::CloseListener => &[NotAcceptingNewRequest],
            ShutdownMode::SendRetryAfter => &[InFlightRequestsDrained],
        },
    }
}

/// Checks `events` against the rules for `config`. See the [module docs](self).
pub fn check_trace(config: &Config, events: &[TracedEvent]) -> Result<TraceSummary, Violation> {
    let mode = config.mode();
    let mut seen = SignalSet::EMPTY;
    let mut times: [Option<Instant>; LifecycleSignal::COUNT] = [None; LifecycleSignal::COUNT];
    let mut stop_listening = false;
    let mut handed_over = false;
    let mut exit_code = None;
    let mut last_at: Option<Instant> = None;

    for (index, e) in events.iter().enumerate() {
        let fail = |rule| {
            Err(Violation {
                index,
                event: e.event,
                rule,
            })
        };
        if exit_code.is_some() {
            return fail(Rule::NothingAfterExit);
        }
        if let (Some(prev), Some(at)) = (last_at, e.at) {
            if at < prev {
                return fail(Rule::TimeGoesBack);
            }
        }
        last_at = e.at.or(last_at);
        match e.event {
            TraceEvent::Signal(signal) => {
                if seen.contains(signal) {
                    return fail(Rule::SignalFiresOnce(signal));
                }
                if let Some(&needs) = predecessors(signal, mode)
                    .iter()
                    .find(|p| !seen.contains(**p))
                {
                    return fail(Rule::Predecessor {
                        event: Some(signal),
                        needs,
                    });
                }
                match signal {
                    LifecycleSignal::MuxAndDiscoveryComplete
                        if seen.contains(LifecycleSignal::ShutdownInitiated) =>
                    {
                        return fail(Rule::MuxCompleteAfterShutdown)
                    }
                    LifecycleSignal::HasBeenReady
                        if seen.contains(LifecycleSignal::ShutdownInitiated) =>
                    {
                        return fail(Rule::ReadyAfterShutdown)
                    }
                    LifecycleSignal::HTTPServerStoppedListening
                        if !stop_listening
                            && events.iter().any(|e| e.event == TraceEvent::StopListening) =>
                    {
                        return fail(Rule::StoppedListeningBeforeStop)
                    }
                    LifecycleSignal::AfterShutdownDelayDuration => {
                        if let (Some(t0), Some(at)) =
                            (times[LifecycleSignal::ShutdownInitiated.index()], e.at)
                        {
                            let observed = at - t0;
                            if observed < config.shutdown_delay() {
                                return fail(Rule::DelayTooShort {
                                    expected: config.shutdown_delay(),
                                    observed,
                                });
                            }
                        }
                    }
                    _ => {}
                }
                seen.insert(signal);
                times[signal.index()] = e.at;
            }
            TraceEvent::StopListening => {
                if stop_listening {
                    return fail(Rule::StopListeningOnce);
                }
                if let Some(&needs) =
                    predecessors(LifecycleSignal::HTTPServerStoppedListening, mode)
                        .iter()
                        .find(|p| !seen.contains(**p))
                {
                    return fail(Rule::Predecessor { event: None, needs });
                }
                stop_listening = true;
            }
            TraceEvent::HandedOver => {
                if handed_over {
                    return fail(Rule::HandOverOnce);
                }
                if seen.contains(LifecycleSignal::ShutdownInitiated) {
                    return fail(Rule::HandOverAfterShutdown);
                }
                handed_over = true;
            }
            TraceEvent::Exit(code) => match code {
                0 => {
                    if !seen.contains(LifecycleSignal::InFlightRequestsDrained)
                        || !seen.contains(LifecycleSignal::HTTPServerStoppedListening)
                    {
                        return fail(Rule::CleanExitBeforeDone);
                    }
                    exit_code = Some(0);
                }
                1 => exit_code = Some(1),
                _ => return fail(Rule::ExitCode),
            },
        }
    }
    Ok(TraceSummary {
        signals: seen,
        exit_code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use LifecycleSignal::*;

    fn trace(signals: &[LifecycleSignal], exit: Option<u8>) -> Vec<TracedEvent> {
        let mut v: Vec<_> = signals
            .iter()
            .map(|s| TracedEvent::untimed(TraceEvent::Signal(*s)))
            .collect();
        if let Some(c) = exit {
            v.push(TracedEvent::untimed(TraceEvent::Exit(c)));
        }
        v
    }

    const MODE_A: [LifecycleSignal; 6] = [
        ShutdownInitiated,
        AfterShutdownDelayDuration,
        PreShutdownHooksStopped,
        NotAcceptingNewRequest,
        HTTPServerStoppedListening,
        InFlightRequestsDrained,
    ];

    #[test]
    fn kube_orders_are_legal() {
        let a = Config::default();
        let summary = check_trace(&a, &trace(&MODE_A, Some(0))).unwrap();
        assert!(summary.complete());
        let b = Config::builder()
            .shutdown_send_retry_after(true)
            .build()
            .unwrap();
        let mut order_b = MODE_A;
        order_b.swap(4, 5);
        check_trace(&b, &trace(&order_b, Some(0))).unwrap();
        // In retry-after mode the order of close-listener mode (`MODE_A`) is illegal: the
        // listener stops only after the drain.
        let err = check_trace(&b, &trace(&MODE_A, Some(0))).unwrap_err();
        assert_eq!(
            err.rule,
            Rule::Predecessor {
                event: Some(HTTPServerStoppedListening),
                needs: InFlightRequestsDrained
            }
        );
    }

    #[test]
    fn violations_name_the_rule() {
        let a = Config::default();
        let err = check_trace(&a, &trace(&[NotAcceptingNewRequest], None)).unwrap_err();
        assert_eq!(err.index, 0);
        assert!(matches!(err.rule, Rule::Predecessor { .. }));
        let err =
            check_trace(&a, &trace(&[ShutdownInitiated, ShutdownInitiated], None)).unwrap_err();
        assert_eq!(err.rule, Rule::SignalFiresOnce(ShutdownInitiated));
        let err = check_trace(&a, &trace(&[ShutdownInitiated], Some(0))).unwrap_err();
        assert_eq!(err.rule, Rule::CleanExitBeforeDone);
        let mut t = trace(&MODE_A, Some(0));
        t.push(TracedEvent::untimed(TraceEvent::Signal(HasBeenReady)));
        assert_eq!(
            check_trace(&a, &t).unwrap_err().rule,
            Rule::NothingAfterExit
        );
        let err = check_trace(
            &a,
            &trace(&[ShutdownInitiated, MuxAndDiscoveryComplete], None),
        )
        .unwrap_err();
        assert_eq!(err.rule, Rule::MuxCompleteAfterShutdown);
        // A second signal may exit 1 at any point.
        assert_eq!(
            check_trace(&a, &trace(&[ShutdownInitiated], Some(1)))
                .unwrap()
                .exit_code,
            Some(1)
        );
        let msg = alloc::format!("{err}");
        assert!(msg.contains("MuxAndDiscoveryComplete"), "{msg}");
    }

    #[test]
    fn delay_is_checked_when_timed() {
        let cfg = Config::builder()
            .shutdown_delay(Duration::from_secs(2))
            .build()
            .unwrap();
        let t = [
            TracedEvent::at(
                TraceEvent::Signal(ShutdownInitiated),
                Instant::from_secs(10),
            ),
            TracedEvent::at(
                TraceEvent::Signal(AfterShutdownDelayDuration),
                Instant::from_secs(11),
            ),
        ];
        assert!(matches!(
            check_trace(&cfg, &t).unwrap_err().rule,
            Rule::DelayTooShort { .. }
        ));
        let back = [
            TracedEvent::at(TraceEvent::Signal(HasBeenReady), Instant::from_secs(10)),
            TracedEvent::at(TraceEvent::Signal(ShutdownInitiated), Instant::from_secs(9)),
        ];
        assert_eq!(
            check_trace(&cfg, &back).unwrap_err().rule,
            Rule::TimeGoesBack
        );
    }
}
