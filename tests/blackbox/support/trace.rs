//! Conformance: the lifecycle events of a run, read back from the server's log with the core's
//! log reader ([`lameduck::trace::log::parse_log`]), checked with the core's reference model
//! ([`lameduck::check_trace`]) for the configuration the server was started with.
//!
//! Every `[graceful-termination] ... name=<LifecycleSignal>` line (the `shutdown event` lines and the
//! `lifecycle event` lines of `HasBeenReady` / `MuxAndDiscoveryComplete`) becomes a
//! [`TraceEvent::Signal`], and the process's exit status a [`TraceEvent::Exit`]. Events are
//! timed by the timestamp the server's logger wrote on each line (its own clock, UTC,
//! microseconds), so the checker's timing rule (`AfterShutdownDelayDuration` no sooner than the
//! shutdown delay after `ShutdownInitiated`) is checked on the server's clock, not on when the
//! test happened to read the pipe. `ShutdownInitiated` is timed by the `received signal` line
//! before it when there is one (or by the previous lifecycle line, if later): both are written
//! before the lifecycle takes the signal's time, so they bound below the moment the delay
//! starts from (the `ShutdownInitiated` line itself could make a correct delay look short by
//! the logger's own latency).

use std::time::Duration;

use lameduck::trace::{TraceEvent, TraceSummary, TracedEvent, Violation};
use lameduck::{check_trace, Config, LifecycleSignal};

use super::process::ServerProcess;

/// The lifecycle configuration the example binary builds from `flags` (parsed by the
/// examples' own flag parser, so it cannot drift from what the server runs with).
pub fn config_for(flags: &[&str]) -> Config {
    let args = flags.iter().map(|s| s.to_string());
    match lameduck_examples::flags::parse("server", args) {
        Ok(lameduck_examples::flags::Parsed::Run(f)) => f.config,
        other => panic!("flags {flags:?} do not describe a server run: {other:?}"),
    }
}

/// The trace of one run: its log (`stderr`) and, if it exited, its exit code. The core's log
/// reader, [`lameduck::trace::log::parse_log`], does the work: this suite checks the servers' logs
/// the way a user checks their own.
pub fn parse_trace(stderr: &str, exit_code: Option<i32>) -> Result<Vec<TracedEvent>, String> {
    lameduck::trace::log::parse_log(stderr, exit_code).map_err(|e| e.to_string())
}

/// The reference model's verdict on a trace, with the trace in the message when it fails.
pub fn check(config: &Config, events: &[TracedEvent]) -> Result<TraceSummary, String> {
    check_trace(config, events).map_err(|v: Violation| format!("{v}\ntrace:\n{}", render(events)))
}

/// One event per line, with times relative to the first timed event.
pub fn render(events: &[TracedEvent]) -> String {
    let epoch = events.iter().find_map(|e| e.at);
    events
        .iter()
        .enumerate()
        .map(|(i, e)| match (e.at, epoch) {
            (Some(at), Some(t0)) => {
                let since = at.saturating_duration_since(t0);
                format!("  #{i} {:>12?}  {}", since, e.event)
            }
            _ => format!("  #{i} {:>12}  {}", "-", e.event),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Trace checks on a finished [`ServerProcess`].
pub trait TraceCheck {
    /// The run's events: its `[graceful-termination]` lines and, once it exited, its exit.
    fn trace(&mut self) -> Vec<TracedEvent>;

    /// Asserts that the process has exited and that its trace is legal for the configuration
    /// `flags` describe (the flags the server was started with, without `--listen`). An exit 0
    /// must show all six termination signals. Returns the checker's summary.
    fn assert_trace_legal(&mut self, flags: &[&str]) -> TraceSummary;
}

impl TraceCheck for ServerProcess {
    fn trace(&mut self) -> Vec<TracedEvent> {
        let code = self
            .wait_exit(Duration::ZERO)
            .map(|status| status.code().unwrap_or(-1));
        parse_trace(&self.stderr_text(), code).unwrap_or_else(|e| {
            panic!(
                "{}: cannot read the trace: {e}\n{}",
                self.name,
                self.describe()
            )
        })
    }

    fn assert_trace_legal(&mut self, flags: &[&str]) -> TraceSummary {
        let config = config_for(flags);
        let status = self
            .wait_exit(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{} has not exited\n{}", self.name, self.describe()));
        let events = self.trace();
        let summary = check(&config, &events).unwrap_or_else(|e| {
            panic!(
                "{}: check_trace rejects the run's trace ({flags:?}): {e}\n{}",
                self.name,
                self.describe()
            )
        });
        assert!(
            summary.complete(),
            "{}: the trace shows no exit (exit status {status})\n{}",
            self.name,
            render(&events)
        );
        if summary.exit_code == Some(0) {
            let missing: Vec<&str> = LifecycleSignal::ALL
                .iter()
                .filter(|s| s.is_termination() && !summary.signals.contains(**s))
                .map(|s| s.name())
                .collect();
            assert!(
                missing.is_empty(),
                "{}: exit 0 without {missing:?}\n{}",
                self.name,
                render(&events)
            );
        }
        summary
    }
}

/// Ways to break a legal graceful-termination trace, each with the rule the checker must name.
pub fn corruptions(
    events: &[TracedEvent],
    config: &Config,
) -> Vec<(&'static str, Vec<TracedEvent>, lameduck::trace::Rule)> {
    use lameduck::trace::Rule;
    let pos = |s: LifecycleSignal| {
        events
            .iter()
            .position(|e| e.event == TraceEvent::Signal(s))
            .unwrap_or_else(|| panic!("no {s} in the trace\n{}", render(events)))
    };
    let si = pos(LifecycleSignal::ShutdownInitiated);
    let asd = pos(LifecycleSignal::AfterShutdownDelayDuration);
    let nar = pos(LifecycleSignal::NotAcceptingNewRequest);
    let drained = pos(LifecycleSignal::InFlightRequestsDrained);
    let mut out = Vec::new();

    // NotAcceptingNewRequest before AfterShutdownDelayDuration (events swapped, times kept).
    let mut swapped = events.to_vec();
    swapped[asd].event = TraceEvent::Signal(LifecycleSignal::NotAcceptingNewRequest);
    swapped[nar].event = TraceEvent::Signal(LifecycleSignal::AfterShutdownDelayDuration);
    out.push((
        "NotAcceptingNewRequest swapped before AfterShutdownDelayDuration",
        swapped,
        Rule::Predecessor {
            event: Some(LifecycleSignal::NotAcceptingNewRequest),
            needs: LifecycleSignal::AfterShutdownDelayDuration,
        },
    ));

    // A signal logged twice.
    let mut duplicated = events.to_vec();
    duplicated.insert(drained + 1, events[drained]);
    out.push((
        "InFlightRequestsDrained duplicated",
        duplicated,
        Rule::SignalFiresOnce(LifecycleSignal::InFlightRequestsDrained),
    ));

    // The drain missing: close-listener mode may stop listening without it but not exit 0;
    // retry-after mode stops listening only after it.
    let mut undrained = events.to_vec();
    undrained.remove(drained);
    let rule = match config.mode() {
        lameduck::ShutdownMode::CloseListener => Rule::CleanExitBeforeDone,
        lameduck::ShutdownMode::SendRetryAfter => Rule::Predecessor {
            event: Some(LifecycleSignal::HTTPServerStoppedListening),
            needs: LifecycleSignal::InFlightRequestsDrained,
        },
    };
    out.push(("InFlightRequestsDrained dropped", undrained, rule));

    // The lame-duck window cut short: AfterShutdownDelayDuration at half the delay.
    if let (Some(t0), false) = (events[si].at, config.shutdown_delay().is_zero()) {
        let mut short = events.to_vec();
        short[asd].at = Some(t0.saturating_add(config.shutdown_delay() / 2));
        out.push((
            "AfterShutdownDelayDuration at half the shutdown delay",
            short,
            Rule::DelayTooShort {
                expected: config.shutdown_delay(),
                observed: config.shutdown_delay() / 2,
            },
        ));
    }

    // Something after the exit.
    let mut after_exit = events.to_vec();
    after_exit.push(TracedEvent::untimed(TraceEvent::Signal(
        LifecycleSignal::HasBeenReady,
    )));
    out.push((
        "an event after the exit",
        after_exit,
        Rule::NothingAfterExit,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real close-listener mode log (tokio_server, `--shutdown-delay 500ms`), with some of its
    /// other lines: the fixture the core's log reader tests (`crates/lameduck/tests/log_parse.rs`)
    /// read too.
    const MODE_A_LOG: &str =
        include_str!("../../../crates/lameduck/tests/fixtures/tokio_server_close_listener_shutdown_delay_500ms.log");

    fn signals(events: &[TracedEvent]) -> Vec<String> {
        events.iter().map(|e| e.event.to_string()).collect()
    }

    #[test]
    fn timestamps_are_read_on_the_server_clock() {
        let line_time = |s: &str| lameduck::trace::log::parse_log_timestamp(s);
        let t = |s: &str| line_time(s).unwrap().as_nanos();
        assert_eq!(t("1970-01-01T00:00:00Z"), 0);
        assert_eq!(t("1970-01-02T00:00:01.5Z"), 86_401_500_000_000);
        assert_eq!(
            t("2026-11-22T05:07:33.916020Z") - t("2026-11-22T05:07:33.415298Z"),
            500_722_000
        );
        // 2000-03-01 is 11017 days after the epoch (leap years on both sides of February).
        assert_eq!(t("2000-03-01T00:00:00Z"), 11_017 * 86_400 * 1_000_000_000);
        assert!(line_time("INFO no time").is_err());
        assert!(line_time("2026-13-01T00:00:00Z").is_err());
    }

    #[test]
    fn a_real_log_parses_into_a_legal_trace() {
        let events = parse_trace(MODE_A_LOG, Some(0)).unwrap();
        assert_eq!(
            signals(&events),
            [
                "MuxAndDiscoveryComplete",
                "HasBeenReady",
                "ShutdownInitiated",
                "PreShutdownHooksStopped",
                "AfterShutdownDelayDuration",
                "NotAcceptingNewRequest",
                "InFlightRequestsDrained",
                "HTTPServerStoppedListening",
                "Exit(0)",
            ]
        );
        // ShutdownInitiated is timed by the `received signal` line before it.
        assert_eq!(
            events[2].at,
            Some(lameduck::trace::log::parse_log_timestamp("2026-11-22T05:07:33.415257Z").unwrap())
        );
        let config = config_for(&["--shutdown-delay", "500ms"]);
        let summary = check(&config, &events).unwrap();
        assert_eq!(summary.exit_code, Some(0));
        // Still running: a legal prefix, not complete.
        let running = parse_trace(MODE_A_LOG, None).unwrap();
        assert!(!check(&config, &running).unwrap().complete());
    }

    #[test]
    fn corrupted_traces_of_a_real_log_are_rejected() {
        let config = config_for(&["--shutdown-delay", "500ms"]);
        let events = parse_trace(MODE_A_LOG, Some(0)).unwrap();
        for (what, corrupted, rule) in corruptions(&events, &config) {
            let v = check_trace(&config, &corrupted)
                .expect_err(&format!("{what}: accepted\n{}", render(&corrupted)));
            assert_eq!(v.rule, rule, "{what}: {v}");
        }
    }

    #[test]
    fn the_exit_code_must_match_the_log() {
        let e = parse_trace(MODE_A_LOG, Some(1)).unwrap_err();
        assert!(e.contains("exits with 0, it exited with 1"), "{e}");
    }

    #[test]
    fn unknown_signal_names_are_an_error() {
        let log =
            "2026-11-22T05:07:33.415298Z  INFO x: [graceful-termination] shutdown event name=Bogus";
        assert!(parse_trace(log, None).unwrap_err().contains("Bogus"));
    }
}
