//! Reading a trace out of a server's log, so that [`check_trace`](super::check_trace) can
//! judge a real run.
//!
//! A driver logs one line per lifecycle signal, in kube-apiserver's style (the repository's
//! `docs/design.md#logs`); the `lameduck-hyper` driver writes them through `tracing` with the
//! default `tracing_subscriber::fmt` format:
//!
//! ```text
//! 2026-11-22T05:07:33.415257Z  INFO lameduck_hyper::server: [graceful-termination] received signal signal="SIGTERM"
//! 2026-11-22T05:07:33.415298Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=ShutdownInitiated
//! 2026-11-22T05:07:33.916201Z  INFO lameduck_hyper::server: [graceful-termination] server is exiting code=0 reason=graceful termination completed
//! ```
//!
//! Lifecycle signal lines after `ShutdownInitiated` also carry `elapsed=` (the time since it), and the
//! exit line is preceded by the termination summary
//! (`[graceful-termination] termination summary: cause=signal ... code=0`), which is read by
//! [`SummaryRecord::parse_line`](crate::summary::SummaryRecord::parse_line), not here.
//!
//! [`parse_log_line`] reads one line: lines without the [`LOG_MARKER`] are not the lifecycle's
//! and give `Ok(None)`; a marked line is a [`LogRecord`] when it names a signal
//! (`name=<LifecycleSignal>`, quoted or not), reports an OS signal (`received signal`), the hand-over
//! of the listeners to a successor (`listeners handed over`) or the exit (`is exiting`, with
//! `code=<n>`). The line's time is its leading RFC 3339 timestamp
//! ([`parse_log_timestamp`]), as an [`Instant`] in nanoseconds since the Unix epoch; a line
//! that does not start with a digit has no time (its events are untimed, and the timing rules
//! are not checked on them).
//!
//! [`LogTrace`] reads a whole log (line by line, as it arrives, or at once with [`parse_log`])
//! and, given the process's exit status, gives the events to check:
//!
//! * every signal line is a [`TraceEvent::Signal`], in log order, and a hand-over line a
//!   [`TraceEvent::HandedOver`];
//! * the exit status is the final [`TraceEvent::Exit`], timed no earlier than the last line; an
//!   exit line whose code differs from the status is an error;
//! * `ShutdownInitiated` is timed by the `received signal` line before it (no earlier than the
//!   previous event, no later than its own line): both are written before the lifecycle takes
//!   the time its shutdown delay starts from, so the rule "`AfterShutdownDelayDuration` no
//!   sooner than the shutdown delay after `ShutdownInitiated`" is not failed by the logger's own
//!   latency on the `ShutdownInitiated` line.
//!
//! # Checking your own server's log in a test
//!
//! Run the server as a child process with `RUST_LOG` letting `info` through and ANSI colours
//! off, send it `SIGTERM`, collect its stderr and exit status, then:
//!
//! ```
//! use core::time::Duration;
//! use lameduck::trace::check_trace;
//! use lameduck::trace::log::parse_log;
//! use lameduck::Config;
//!
//! // What the test read from the child's stderr, and `status.code()`.
//! let stderr = "\
//! 2026-11-22T05:07:32.884852Z  INFO lameduck_hyper::server: [graceful-termination] lifecycle event name=MuxAndDiscoveryComplete
//! 2026-11-22T05:07:33.412613Z  INFO lameduck_hyper::server: [graceful-termination] lifecycle event name=HasBeenReady
//! 2026-11-22T05:07:33.415257Z  INFO lameduck_hyper::server: [graceful-termination] received signal signal=\"SIGTERM\"
//! 2026-11-22T05:07:33.415298Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=ShutdownInitiated
//! 2026-11-22T05:07:33.415305Z  INFO lameduck_hyper::server: [graceful-termination] pre-shutdown hooks completed, shutdown event name=PreShutdownHooksStopped
//! 2026-11-22T05:07:33.916020Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=AfterShutdownDelayDuration
//! 2026-11-22T05:07:33.916059Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=NotAcceptingNewRequest
//! 2026-11-22T05:07:33.916087Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=InFlightRequestsDrained
//! 2026-11-22T05:07:33.916198Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=HTTPServerStoppedListening
//! 2026-11-22T05:07:33.916201Z  INFO lameduck_hyper::server: [graceful-termination] server is exiting code=0 reason=graceful termination completed
//! ";
//! let exit_status = Some(0);
//!
//! // The configuration the server was started with.
//! let config = Config::builder()
//!     .shutdown_delay(Duration::from_millis(500))
//!     .build()?;
//! let events = parse_log(stderr, exit_status)?;
//! let summary = check_trace(&config, &events)?;
//! assert_eq!(summary.exit_code, Some(0));
//!
//! // The same log is too fast for a one-second delay, and the checker says so.
//! let longer = Config::builder().shutdown_delay(Duration::from_secs(1)).build()?;
//! let violation = check_trace(&longer, &events).unwrap_err();
//! assert!(matches!(violation.rule, lameduck::trace::Rule::DelayTooShort { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::{TraceEvent, TracedEvent};
use crate::signal::LifecycleSignal;
use crate::time::Instant;

/// The text every lifecycle log line carries.
pub const LOG_MARKER: &str = "[graceful-termination]";

/// What one lifecycle log line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogRecord {
    /// A lifecycle signal fired (`name=<LifecycleSignal>`).
    Signal(LifecycleSignal),
    /// An OS signal arrived, before the lifecycle took it (`received signal`).
    ReceivedSignal,
    /// The listening sockets went to a ready successor, which starts the termination
    /// (`listeners handed over`).
    HandedOver,
    /// The process is about to exit (`is exiting`), with the code when the line shows one
    /// (`code=<n>`).
    Exiting {
        /// The logged exit code.
        code: Option<u8>,
    },
}

/// A lifecycle log line: what it reports and when it was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogLine {
    /// What the line reports.
    pub record: LogRecord,
    /// The line's timestamp, in nanoseconds since the Unix epoch; `None` when the line has none.
    pub at: Option<Instant>,
}

/// Why one log line cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The line starts with a digit, but not with an RFC 3339 timestamp at or after the Unix
    /// epoch.
    #[error("no RFC 3339 timestamp at the start ({stamp:?})")]
    BadTimestamp {
        /// The first word of the line.
        stamp: String,
    },
    /// A `name=` field that is not a signal's exact name.
    #[error("unknown signal name {name:?}")]
    UnknownSignal {
        /// The name as logged.
        name: String,
    },
    /// An exit line whose `code=` is not a number from 0 to 255.
    #[error("exit code {code:?} is not a number from 0 to 255")]
    BadExitCode {
        /// The code as logged.
        code: String,
    },
}

/// Why a log cannot be read into a trace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogParseError {
    /// A line cannot be read.
    #[error("log line {line}: {error}")]
    Line {
        /// The line's index, from 0.
        line: usize,
        /// What is wrong with it.
        error: LineError,
    },
    /// The log announced an exit code other than the one the process exited with.
    #[error("the log says the process exits with {logged}, it exited with {exited}")]
    ExitCodeMismatch {
        /// The code of the exit line.
        logged: u8,
        /// The process's exit status.
        exited: i32,
    },
    /// The exit status is not an exit code of the lifecycle (0 to 255).
    #[error("exit status {0} is not from 0 to 255")]
    ExitStatusOutOfRange(i32),
}

/// Reads one log line. `Ok(None)`: not a lifecycle line, or a lifecycle line that reports none
/// of the [`LogRecord`]s. See the [module docs](self) for the format.
///
/// ```
/// use lameduck::trace::log::{parse_log_line, LogRecord};
/// use lameduck::LifecycleSignal;
///
/// let line = "2026-11-22T05:07:33.916059Z  INFO lameduck_hyper::server: \
///             [graceful-termination] shutdown event name=NotAcceptingNewRequest";
/// let parsed = parse_log_line(line)?.unwrap();
/// assert_eq!(parsed.record, LogRecord::Signal(LifecycleSignal::NotAcceptingNewRequest));
/// assert_eq!(parsed.at.unwrap().as_nanos() % 1_000_000_000, 916_059_000);
/// assert_eq!(parse_log_line("Serving on 127.0.0.1:8080")?, None);
/// assert!(parse_log_line("x [graceful-termination] shutdown event name=Bogus").is_err());
/// # Ok::<(), lameduck::trace::log::LineError>(())
/// ```
pub fn parse_log_line(line: &str) -> Result<Option<LogLine>, LineError> {
    if !line.contains(LOG_MARKER) {
        return Ok(None);
    }
    let record = if line.contains("received signal") {
        LogRecord::ReceivedSignal
    } else if line.contains("listeners handed over") {
        LogRecord::HandedOver
    } else if line.contains("is exiting") {
        let code = match field(line, "code") {
            None => None,
            Some(code) => Some(code.parse::<u8>().map_err(|_| LineError::BadExitCode {
                code: code.to_string(),
            })?),
        };
        LogRecord::Exiting { code }
    } else if let Some(name) = field(line, "name") {
        LogRecord::Signal(LifecycleSignal::from_name(name).ok_or_else(|| {
            LineError::UnknownSignal {
                name: name.to_string(),
            }
        })?)
    } else {
        return Ok(None);
    };
    let stamp = line.split_whitespace().next().unwrap_or_default();
    let at = if stamp.starts_with(|c: char| c.is_ascii_digit()) {
        Some(parse_log_timestamp(stamp)?)
    } else {
        None
    };
    Ok(Some(LogLine { record, at }))
}

/// The value of the first `key=value` word of `line`, without surrounding quotes.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|word| {
        let value = word.strip_prefix(key)?.strip_prefix('=')?;
        Some(value.trim_matches('"'))
    })
}

/// An RFC 3339 timestamp (`2026-11-22T05:07:33.415257Z`, or with an offset such as
/// `+01:00`), as nanoseconds since the Unix epoch. Up to nine fraction digits; a leap second
/// (`:60`) counts as the second after `:59`.
///
/// ```
/// use lameduck::trace::log::parse_log_timestamp;
///
/// assert_eq!(parse_log_timestamp("1970-01-02T00:00:01.5Z")?.as_nanos(), 86_401_500_000_000);
/// assert_eq!(
///     parse_log_timestamp("1970-01-01T01:00:00+01:00")?,
///     parse_log_timestamp("1970-01-01T00:00:00Z")?,
/// );
/// assert!(parse_log_timestamp("2026-13-01T00:00:00Z").is_err());
/// # Ok::<(), lameduck::trace::log::LineError>(())
/// ```
pub fn parse_log_timestamp(stamp: &str) -> Result<Instant, LineError> {
    let bad = || LineError::BadTimestamp {
        stamp: stamp.to_string(),
    };
    let (date, rest) = stamp.split_once(['T', 't']).ok_or_else(bad)?;
    // The offset east of UTC, in seconds, and the time of day before it.
    let (time, offset) = if let Some(time) = rest.strip_suffix(['Z', 'z']) {
        (time, 0)
    } else {
        let sign_at = rest.rfind(['+', '-']).ok_or_else(bad)?;
        let (time, offset) = rest.split_at(sign_at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (oh, om) = offset[1..].split_once(':').ok_or_else(bad)?;
        let (oh, om) = (
            number(oh, 2).ok_or_else(bad)?,
            number(om, 2).ok_or_else(bad)?,
        );
        if oh > 23 || om > 59 {
            return Err(bad());
        }
        (time, sign * (oh * 3600 + om * 60))
    };
    let mut d = date.splitn(3, '-');
    let y = number(d.next().unwrap_or_default(), 4).ok_or_else(bad)?;
    let m = number(d.next().unwrap_or_default(), 2).ok_or_else(bad)?;
    let day = number(d.next().unwrap_or_default(), 2).ok_or_else(bad)?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':');
    let hh = number(t.next().unwrap_or_default(), 2).ok_or_else(bad)?;
    let mm = number(t.next().unwrap_or_default(), 2).ok_or_else(bad)?;
    let ss = number(t.next().unwrap_or_default(), 2).ok_or_else(bad)?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    if (time.contains('.') && frac.is_empty()) || frac.len() > 9 {
        return Err(bad());
    }
    let nanos_frac = if frac.is_empty() {
        0
    } else {
        number(frac, frac.len()).ok_or_else(bad)? * 10i64.pow(9 - frac.len() as u32)
    };
    let secs = days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss - offset;
    let nanos = u64::try_from(secs)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|n| n.checked_add(nanos_frac as u64))
        .ok_or_else(bad)?;
    Ok(Instant::from_nanos(nanos))
}

/// `digits` ASCII digits exactly, as a number.
fn number(s: &str, digits: usize) -> Option<i64> {
    if s.len() != digits || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A log read into trace events, line by line. See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct LogTrace {
    events: Vec<TracedEvent>,
    lines: usize,
    received_signal_at: Option<Instant>,
    exit_line: Option<(Option<Instant>, Option<u8>)>,
}

impl LogTrace {
    /// An empty trace.
    #[must_use]
    pub fn new() -> Self {
        LogTrace::default()
    }

    /// Reads the next line of the log.
    pub fn push_line(&mut self, line: &str) -> Result<(), LogParseError> {
        let index = self.lines;
        self.lines += 1;
        let Some(LogLine { record, at }) =
            parse_log_line(line).map_err(|error| LogParseError::Line { line: index, error })?
        else {
            return Ok(());
        };
        match record {
            LogRecord::ReceivedSignal => {
                self.received_signal_at = self.received_signal_at.or(at);
            }
            LogRecord::Exiting { code } => self.exit_line = Some((at, code)),
            LogRecord::HandedOver => self.events.push(TracedEvent {
                event: TraceEvent::HandedOver,
                at,
            }),
            LogRecord::Signal(signal) => {
                let at = match (signal, at) {
                    // The `received signal` line may come from another task than the
                    // lifecycle's lines, so its time may be older than a lifecycle line written
                    // before it: bounded below by the previous event (also written before the
                    // instant ShutdownInitiated fired at).
                    (LifecycleSignal::ShutdownInitiated, Some(own)) => {
                        let previous = self.events.last().and_then(|e| e.at);
                        Some(
                            self.received_signal_at
                                .max(previous)
                                .unwrap_or(own)
                                .min(own),
                        )
                    }
                    _ => at,
                };
                self.events.push(TracedEvent {
                    event: TraceEvent::Signal(signal),
                    at,
                });
            }
        }
        Ok(())
    }

    /// The events read so far (no exit: [`LogTrace::finish`] adds it).
    #[must_use]
    pub fn events(&self) -> &[TracedEvent] {
        &self.events
    }

    /// The exit code the log announced, if it has an exit line with a code.
    #[must_use]
    pub fn logged_exit_code(&self) -> Option<u8> {
        self.exit_line.and_then(|(_, code)| code)
    }

    /// The trace: the events read and, when the process exited with `exit_status`
    /// (`std::process::ExitStatus::code`), the exit, timed no earlier than the last line.
    /// `None`: still running (a legal prefix is still checked).
    pub fn finish(self, exit_status: Option<i32>) -> Result<Vec<TracedEvent>, LogParseError> {
        let mut events = self.events;
        let Some(status) = exit_status else {
            return Ok(events);
        };
        if let Some((_, Some(logged))) = self.exit_line {
            if i32::from(logged) != status {
                return Err(LogParseError::ExitCodeMismatch {
                    logged,
                    exited: status,
                });
            }
        }
        let code = u8::try_from(status).map_err(|_| LogParseError::ExitStatusOutOfRange(status))?;
        // The process exits after every line it logged, whichever thread wrote them.
        let last = events.last().and_then(|e| e.at);
        let at = self.exit_line.and_then(|(at, _)| at).max(last);
        events.push(TracedEvent {
            event: TraceEvent::Exit(code),
            at,
        });
        Ok(events)
    }
}

/// Reads a whole log (`log`: its lines) into a trace; `exit_status` as in
/// [`LogTrace::finish`]. See the [module docs](self).
pub fn parse_log(log: &str, exit_status: Option<i32>) -> Result<Vec<TracedEvent>, LogParseError> {
    let mut trace = LogTrace::new();
    for line in log.lines() {
        trace.push_line(line)?;
    }
    trace.finish(exit_status)
}
