//! The log reader (`lameduck::trace::log`): a real server log reads into the trace the
//! reference model accepts, each record and timestamp form is read exactly, and every malformed
//! line is a typed error, never a panic.

use std::time::Duration;

use lameduck::trace::check_trace;
use lameduck::trace::log::{
    parse_log, parse_log_line, parse_log_timestamp, LineError, LogLine, LogParseError, LogRecord,
    LogTrace, LOG_MARKER,
};
use lameduck::trace::{TraceEvent, TracedEvent};
use lameduck::{Config, Instant, LifecycleSignal};

/// A real close-listener mode log (tokio_server, `--shutdown-delay 500ms`), with some of its
/// other lines. The black-box suite's trace tests (`tests/blackbox/support/trace.rs`) read the
/// same file.
const MODE_A_LOG: &str =
    include_str!("fixtures/tokio_server_close_listener_shutdown_delay_500ms.log");

fn ts(stamp: &str) -> Instant {
    parse_log_timestamp(stamp).unwrap()
}

fn names(events: &[TracedEvent]) -> Vec<String> {
    events.iter().map(|e| e.event.to_string()).collect()
}

#[test]
fn a_real_log_reads_into_a_legal_complete_trace() {
    let events = parse_log(MODE_A_LOG, Some(0)).unwrap();
    assert_eq!(
        names(&events),
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
    // Each signal is timed by its own line, but ShutdownInitiated by the `received signal`
    // line before it; the exit by the exit line.
    assert_eq!(events[1].at, Some(ts("2026-11-22T05:07:33.412613Z")));
    assert_eq!(events[2].at, Some(ts("2026-11-22T05:07:33.415257Z")));
    assert_eq!(events[3].at, Some(ts("2026-11-22T05:07:33.415305Z")));
    assert_eq!(events[8].at, Some(ts("2026-11-22T05:07:33.916201Z")));
    let config = Config::builder()
        .shutdown_delay(Duration::from_millis(500))
        .build()
        .unwrap();
    let summary = check_trace(&config, &events).unwrap();
    assert_eq!(summary.exit_code, Some(0));
    // Still running: the same events without the exit, a legal prefix.
    let running = parse_log(MODE_A_LOG, None).unwrap();
    assert_eq!(running, events[..8]);
    assert!(!check_trace(&config, &running).unwrap().complete());
}

#[test]
fn shutdown_initiated_is_timed_between_the_previous_event_and_its_own_line() {
    let line = |t: &str, rest: &str| format!("{t} INFO x: {LOG_MARKER} {rest}\n");
    // `received signal` written (by another task) before the previous lifecycle line: the
    // previous line's time bounds it below.
    let log = line("2026-01-01T00:00:01Z", "received signal")
        + &line("2026-01-01T00:00:02Z", "lifecycle event name=HasBeenReady")
        + &line(
            "2026-01-01T00:00:03Z",
            "shutdown event name=ShutdownInitiated",
        );
    let events = parse_log(&log, None).unwrap();
    assert_eq!(events[1].at, Some(ts("2026-01-01T00:00:02Z")));
    // No `received signal` line: its own line's time.
    let log = line(
        "2026-01-01T00:00:03Z",
        "shutdown event name=ShutdownInitiated",
    );
    assert_eq!(
        parse_log(&log, None).unwrap()[0].at,
        Some(ts("2026-01-01T00:00:03Z"))
    );
    // Only the first `received signal` line counts (a second signal forces the exit).
    let log = line("2026-01-01T00:00:01Z", "received signal")
        + &line("2026-01-01T00:00:02Z", "received signal")
        + &line(
            "2026-01-01T00:00:03Z",
            "shutdown event name=ShutdownInitiated",
        );
    assert_eq!(
        parse_log(&log, None).unwrap()[0].at,
        Some(ts("2026-01-01T00:00:01Z"))
    );
    // Never later than its own line.
    let log = line("2026-01-01T00:00:05Z", "received signal")
        + &line(
            "2026-01-01T00:00:03Z",
            "shutdown event name=ShutdownInitiated",
        );
    assert_eq!(
        parse_log(&log, None).unwrap()[0].at,
        Some(ts("2026-01-01T00:00:03Z"))
    );
}

#[test]
fn each_record_is_read() {
    let parse = |s: &str| parse_log_line(s).unwrap();
    assert_eq!(parse("Serving on 127.0.0.1:8080"), None);
    assert_eq!(parse("[graceful-termination] waiting for shutdown"), None);
    assert_eq!(
        parse("[graceful-termination] received signal signal=\"SIGTERM\" name=Bogus"),
        Some(LogLine {
            record: LogRecord::ReceivedSignal,
            at: None
        })
    );
    assert_eq!(
        parse("[graceful-termination] server is exiting code=1 reason=x"),
        Some(LogLine {
            record: LogRecord::Exiting { code: Some(1) },
            at: None
        })
    );
    assert_eq!(
        parse("[graceful-termination] server is exiting"),
        Some(LogLine {
            record: LogRecord::Exiting { code: None },
            at: None
        })
    );
    // Quoted names (logfmt) too; `xname=` and `name` without `=` are not the field.
    assert_eq!(
        parse("[graceful-termination] shutdown event name=\"InFlightRequestsDrained\""),
        Some(LogLine {
            record: LogRecord::Signal(LifecycleSignal::InFlightRequestsDrained),
            at: None
        })
    );
    assert_eq!(parse("[graceful-termination] event xname=Bogus name"), None);
    assert_eq!(
        parse("2026-01-01T00:00:00Z [graceful-termination] lifecycle event name=HasBeenReady"),
        Some(LogLine {
            record: LogRecord::Signal(LifecycleSignal::HasBeenReady),
            at: Some(ts("2026-01-01T00:00:00Z"))
        })
    );
}

#[test]
fn malformed_lines_are_typed_errors() {
    let err = |s: &str| parse_log_line(s).unwrap_err();
    assert_eq!(
        err("[graceful-termination] shutdown event name=NotAcceptingNewRequests"),
        LineError::UnknownSignal {
            name: "NotAcceptingNewRequests".into()
        }
    );
    assert_eq!(
        err("[graceful-termination] server is exiting code=256"),
        LineError::BadExitCode { code: "256".into() }
    );
    assert_eq!(
        err("2026-01-01 [graceful-termination] lifecycle event name=HasBeenReady"),
        LineError::BadTimestamp {
            stamp: "2026-01-01".into()
        }
    );
    // The error names the line, from 0.
    let log = format!("x\n1970-13-01T00:00:00Z {LOG_MARKER} shutdown event name=HasBeenReady\n");
    let e = parse_log(&log, None).unwrap_err();
    assert_eq!(
        e,
        LogParseError::Line {
            line: 1,
            error: LineError::BadTimestamp {
                stamp: "1970-13-01T00:00:00Z".into()
            }
        }
    );
    assert!(e.to_string().starts_with("log line 1: "), "{e}");
}

#[test]
fn the_exit_status_must_match_the_log_and_be_an_exit_code() {
    assert_eq!(
        parse_log(MODE_A_LOG, Some(1)).unwrap_err(),
        LogParseError::ExitCodeMismatch {
            logged: 0,
            exited: 1
        }
    );
    assert_eq!(
        parse_log("", Some(-1)).unwrap_err(),
        LogParseError::ExitStatusOutOfRange(-1)
    );
    assert_eq!(
        parse_log("", Some(256)).unwrap_err(),
        LogParseError::ExitStatusOutOfRange(256)
    );
    // No lines at all: an untimed exit.
    assert_eq!(
        parse_log("", Some(1)).unwrap(),
        [TracedEvent::untimed(TraceEvent::Exit(1))]
    );
    // An exit line without a code does not contradict the status.
    let log = format!("{LOG_MARKER} server is exiting\n");
    assert_eq!(
        parse_log(&log, Some(1)).unwrap(),
        [TracedEvent::untimed(TraceEvent::Exit(1))]
    );
    // The exit is timed no earlier than the last line, even when the exit line comes first.
    let log = format!(
        "1970-01-01T00:00:05Z {LOG_MARKER} server is exiting code=1\n\
         1970-01-01T00:00:09Z {LOG_MARKER} shutdown event name=ShutdownInitiated\n"
    );
    let events = parse_log(&log, Some(1)).unwrap();
    assert_eq!(events[1].at, Some(Instant::from_secs(9)));
}

#[test]
fn a_log_is_read_line_by_line() {
    let mut trace = LogTrace::new();
    assert_eq!(trace.logged_exit_code(), None);
    for line in MODE_A_LOG.lines().take(4) {
        trace.push_line(line).unwrap();
    }
    assert_eq!(
        names(trace.events()),
        ["MuxAndDiscoveryComplete", "HasBeenReady"]
    );
    for line in MODE_A_LOG.lines().skip(4) {
        trace.push_line(line).unwrap();
    }
    assert_eq!(trace.logged_exit_code(), Some(0));
    assert_eq!(trace.events().len(), 8);
    assert_eq!(trace.finish(Some(0)).unwrap().len(), 9);
}

#[test]
fn timestamps() {
    let nanos = |s: &str| parse_log_timestamp(s).map(Instant::as_nanos);
    assert_eq!(nanos("1970-01-01T00:00:00Z"), Ok(0));
    assert_eq!(nanos("1970-01-01t00:00:00z"), Ok(0));
    assert_eq!(nanos("1970-01-02T00:00:01.5Z"), Ok(86_401_500_000_000));
    assert_eq!(nanos("1970-01-01T00:00:00.000000001Z"), Ok(1));
    assert_eq!(nanos("1970-01-01T00:00:60Z"), Ok(60_000_000_000));
    // 2000-03-01 is 11017 days after the epoch (leap years on both sides of February).
    assert_eq!(
        nanos("2000-03-01T00:00:00Z"),
        Ok(11_017 * 86_400 * 1_000_000_000)
    );
    assert_eq!(
        nanos("2000-02-29T23:59:59Z"),
        Ok((11_017 * 86_400 - 1) * 1_000_000_000)
    );
    assert_eq!(
        nanos("2026-11-22T05:07:33.916020Z").unwrap()
            - nanos("2026-11-22T05:07:33.415298Z").unwrap(),
        500_722_000
    );
    // Offsets east and west of UTC.
    assert_eq!(nanos("1970-01-01T01:30:00+01:30"), Ok(0));
    assert_eq!(nanos("1970-01-01T00:00:00-00:01"), Ok(60_000_000_000));
    assert_eq!(nanos("1969-12-31T23:00:00-01:00"), Ok(0));
    // The largest offsets: 23:59 either way.
    assert_eq!(
        nanos("2000-01-02T00:00:00+23:59"),
        nanos("2000-01-01T00:01:00Z")
    );
    assert_eq!(
        nanos("2000-01-01T00:00:00-23:59"),
        nanos("2000-01-01T23:59:00Z")
    );
    for bad in [
        "",
        "INFO",
        "1970-01-01T00:00:00",
        "1970-01-01 00:00:00Z",
        "1970-01-01T00:00:00.Z",
        "1970-01-01T00:00:00.0000000001Z",
        "1970-01-01T00:00:00.1xZ",
        "1970-00-01T00:00:00Z",
        "1970-13-01T00:00:00Z",
        "1970-01-00T00:00:00Z",
        "1970-01-32T00:00:00Z",
        "1970-01-01T24:00:00Z",
        "1970-01-01T00:60:00Z",
        "1970-01-01T00:00:61Z",
        "1970-1-01T00:00:00Z",
        "+970-01-01T00:00:00Z",
        "2000-01-01T00:00:00+24:00",
        "2000-01-01T00:00:00+00:60",
        "2000-01-01T00:00:00-24:00",
        "1970-01-01T00:00:00+0000",
        "1969-12-31T23:59:59Z",
        "1970-01-01T00:00:00+00:01",
        "9999-12-31T23:59:59+é",
    ] {
        assert_eq!(
            parse_log_timestamp(bad),
            Err(LineError::BadTimestamp { stamp: bad.into() }),
            "{bad:?}"
        );
    }
}

/// The current format: `elapsed=` on the signal lines after `ShutdownInitiated` and the
/// termination summary before the exit line. The summary is not a trace record; its own parser
/// reads it.
#[test]
fn elapsed_fields_and_the_summary_line_read_as_before() {
    let log = "\
2026-11-23T14:24:08.348565Z  INFO lameduck_hyper::server: [graceful-termination] received signal signal=\"SIGTERM\"
2026-11-23T14:24:08.348765Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=ShutdownInitiated
2026-11-23T14:24:08.348783Z  INFO lameduck_hyper::server: [graceful-termination] pre-shutdown hooks completed, shutdown event name=PreShutdownHooksStopped elapsed=0ns
2026-11-23T14:24:09.350307Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=AfterShutdownDelayDuration elapsed=1.001565096s
2026-11-23T14:24:09.350351Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=NotAcceptingNewRequest elapsed=1.001565096s
2026-11-23T14:24:11.074295Z  INFO lameduck_hyper::server: [graceful-termination] normal requests have drained took=1.723977919s
2026-11-23T14:24:11.074341Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=InFlightRequestsDrained elapsed=2.725537247s
2026-11-23T14:24:11.074749Z  INFO lameduck_hyper::server: [graceful-termination] shutdown event name=HTTPServerStoppedListening elapsed=2.726034755s
2026-11-23T14:24:11.074768Z  INFO lameduck_hyper::server: [graceful-termination] termination summary: cause=signal signal_to_exit=2.726s lame_duck=1.001s normal_drain=1.723s long_running_drain=- requests_drained=1 requests_remaining=0 streams_ended=0 streams_remaining=0 rejected=1 rejected_not_accepting=0 rejected_retry_after=1 rejected_request_timeout=0 rejected_routes_not_ready=0 code=0
2026-11-23T14:24:11.074784Z  INFO lameduck_hyper::server: [graceful-termination] server is exiting code=0 reason=graceful termination completed
";
    let events = parse_log(log, Some(0)).unwrap();
    assert_eq!(
        names(&events),
        [
            "ShutdownInitiated",
            "PreShutdownHooksStopped",
            "AfterShutdownDelayDuration",
            "NotAcceptingNewRequest",
            "InFlightRequestsDrained",
            "HTTPServerStoppedListening",
            "Exit(0)",
        ]
    );
    let summary = log
        .lines()
        .find_map(lameduck::summary::SummaryRecord::parse_line)
        .unwrap();
    assert_eq!(summary.requests_drained, 1);
    assert_eq!(summary.code, Some(0));
}
