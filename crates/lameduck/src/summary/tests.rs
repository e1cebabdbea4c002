//! The summary's numbers, its line, and reading it back.

use super::*;
use crate::machine::{DrainPlan, ExitReason};
use alloc::string::ToString;

#[test]
fn a_termination_in_numbers() {
    let mut s = TerminationSummary::new();
    let t = Instant::from_millis;
    s.observe_input(&Input::StopRequested(StopSource::OsSignal));
    let sig = |signal, at| Event::Signal { signal, at };
    s.observe(
        &sig(LifecycleSignal::ShutdownInitiated, t(1000)),
        t(1000),
        None,
    );
    // A later stop request does not change the cause.
    s.observe_input(&Input::StopRequested(StopSource::Api));
    s.observe(
        &sig(LifecycleSignal::NotAcceptingNewRequest, t(1500)),
        t(1500),
        None,
    );
    let plan = DrainPlan {
        normal_in_flight: 3,
        long_running_in_flight: 2,
        normal_deadline: None,
        long_running_deadline: None,
        pacing_interval: None,
    };
    s.observe(&Event::DrainStarted(plan), t(1500), None);
    let normal = Event::NormalDrainFinished {
        remaining: 1,
        timed_out: true,
    };
    s.observe(&normal, t(2500), None);
    let lr = Event::LongRunningDrainFinished {
        before: 2,
        after: 0,
        timed_out: false,
        skipped: false,
    };
    s.observe(&lr, t(1750), None);
    let exit = Event::Exit {
        code: 0,
        reason: ExitReason::Graceful,
    };
    s.observe(&exit, t(2600), None);
    let rejected = RejectionCounts::default().with(RejectionReason::RetryAfter, 4);
    let arrivals = ArrivalCounts {
        last_new_connection: Some(Duration::from_millis(380)),
        last_new_request: Some(Duration::from_millis(420)),
        late_connections: 1,
        late_requests: 2,
        requests_before_ready: 0,
        readyz_probe_interval: Some(Duration::from_millis(2000)),
        failed_readyz_probes: 1,
    };
    let r = s.record(rejected, arrivals);
    assert_eq!(r.cause, Some(StopCause::OsSignal));
    assert_eq!(r.lame_duck, Some(Duration::from_millis(500)));
    assert_eq!(r.normal_drain, Some(Duration::from_secs(1)));
    assert_eq!(r.long_running_drain, Some(Duration::from_millis(250)));
    assert_eq!((r.requests_drained, r.requests_remaining), (2, 1));
    assert_eq!((r.streams_ended, r.streams_remaining), (2, 0));
    assert_eq!(r.signal_to_exit, Some(Duration::from_millis(1600)));
    let line = r.to_string();
    assert!(line.starts_with("cause=signal signal_to_exit=1.600s lame_duck=0.500s"));
    assert!(line.ends_with(
        "rejected_routes_not_ready=0 last_new_connection=0.380s last_new_request=0.420s \
         late_connections=1 late_requests=2 requests_before_ready=0 \
         readyz_probe_interval=2.000s failed_readyz_probes=1 websocket_closes=0 \
         websocket_unanswered=0 connections_cut=0 last_connection_closed=- code=0"
    ));
    let text = alloc::format!("x [graceful-termination] {SUMMARY_MARKER} {line}");
    assert_eq!(SummaryRecord::parse_line(&text), Some(r));
}

#[test]
fn an_exit_before_any_stop() {
    let mut s = TerminationSummary::new();
    let exit = Event::Exit {
        code: 1,
        reason: ExitReason::Failure,
    };
    s.observe(&exit, Instant::from_millis(5), None);
    let r = s.record(RejectionCounts::default(), ArrivalCounts::default());
    let line = r.to_string();
    assert!(
        line.starts_with("cause=- signal_to_exit=- lame_duck=-"),
        "{line}"
    );
    let text = alloc::format!("{SUMMARY_MARKER} {line}");
    assert_eq!(SummaryRecord::parse_line(&text), Some(r));
}

#[test]
fn malformed_lines_are_refused() {
    assert_eq!(SummaryRecord::parse_line("no marker"), None);
    let good = SummaryRecord::default().to_string();
    let line = alloc::format!("{SUMMARY_MARKER} {good}");
    assert!(SummaryRecord::parse_line(&line).is_some());
    let bad = line.replace("requests_drained=0", "requests_drained=x");
    assert_eq!(SummaryRecord::parse_line(&bad), None);
    let missing = line.replace("streams_ended=0", "");
    assert_eq!(SummaryRecord::parse_line(&missing), None);
    let wrong_total = line.replace("rejected=0", "rejected=2");
    assert_eq!(SummaryRecord::parse_line(&wrong_total), None);
    let bad_offset = line.replace("last_new_connection=-", "last_new_connection=1s");
    assert_eq!(SummaryRecord::parse_line(&bad_offset), None);
}

#[test]
fn lines_from_before_the_arrival_fields_read_with_none() {
    let line = "[graceful-termination] termination summary: cause=signal \
        signal_to_exit=1.503s lame_duck=0.500s normal_drain=1.002s long_running_drain=- \
        requests_drained=3 requests_remaining=0 streams_ended=0 streams_remaining=0 \
        rejected=0 rejected_not_accepting=0 rejected_retry_after=0 \
        rejected_request_timeout=0 rejected_routes_not_ready=0 code=0";
    let r = SummaryRecord::parse_line(line).expect("parsed");
    assert_eq!(r.arrivals, ArrivalCounts::default());
    assert_eq!(r.goodbyes, GoodbyeCounts::default());
    assert_eq!(r.requests_drained, 3);
}
