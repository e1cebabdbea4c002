//! Peers cannot hold a termination: how long a stopped connection may stay whatever its peer
//! does (`Shared::connection_bound`), and what is counted of the connections closed there.

mod common;

use std::time::Duration;

use common::{ms, secs, Sim};
use lameduck::connection::{ConnectionWork, CutKind, SILENT_PEER_TIMEOUT};
use lameduck::summary::{SummaryRecord, TerminationSummary};
use lameduck::{Config, Instant, LifecycleSignal};

fn config(retry_after: bool, timeout: Duration, grace: Duration) -> Config {
    Config::builder()
        .shutdown_delay(secs(2))
        .shutdown_send_retry_after(retry_after)
        .request_timeout(timeout)
        .shutdown_watch_termination_grace_period(grace)
        .build()
        .expect("valid")
}

/// A simulator whose gate closed at T+2 s (signal at T+0).
fn gate_closed(config: Config) -> (Sim, Instant) {
    let mut sim = Sim::serving(config, |_| {});
    sim.stop();
    sim.advance(secs(2));
    let closed = sim
        .fired_at(LifecycleSignal::NotAcceptingNewRequest)
        .expect("the gate closed");
    (sim, closed)
}

fn busy(normal: bool, long_running: bool, late_until: Option<Instant>) -> ConnectionWork {
    ConnectionWork::Busy {
        normal,
        long_running,
        late_until,
    }
}

#[test]
fn a_connection_without_work_is_closed_a_second_after_its_stop_or_its_last_work() {
    let (sim, closed) = gate_closed(config(false, secs(60), secs(10)));
    let shared = sim.shared();
    // Idle at the stop: the peer gets one second to take the goodbye.
    let idle = ConnectionWork::Idle { since: closed };
    assert_eq!(
        shared.connection_bound(closed, idle),
        Some(closed + secs(1))
    );
    assert_eq!(SILENT_PEER_TIMEOUT, secs(1));
    // Its last response ended after the stop: one second after that.
    let later = ConnectionWork::Idle {
        since: closed + ms(2500),
    };
    assert_eq!(
        shared.connection_bound(closed, later),
        Some(closed + ms(3500))
    );
    // Stopped later than the gate closed (retry-after mode stops after the drain, or the
    // connection lingered for its first request): measured from its own stop.
    let stopped = closed + ms(700);
    assert_eq!(
        shared.connection_bound(stopped, ConnectionWork::Idle { since: closed }),
        Some(stopped + secs(1))
    );
}

#[test]
fn work_in_flight_holds_a_connection_until_its_own_bound_then_one_second() {
    let (sim, closed) = gate_closed(config(false, secs(60), secs(10)));
    let shared = sim.shared();
    // A normal request admitted before the gate closed: the request timeout from the close.
    assert_eq!(
        shared.connection_bound(closed, busy(true, false, None)),
        Some(closed + secs(60))
    );
    // Long-running only: the grace period, even though it is shorter than the timeout.
    assert_eq!(
        shared.connection_bound(closed, busy(false, true, None)),
        Some(closed + secs(10))
    );
    // Both: the later of the two.
    assert_eq!(
        shared.connection_bound(closed, busy(true, true, None)),
        Some(closed + secs(60))
    );
    // A request served after the close: its own deadline.
    let late = closed + secs(70);
    assert_eq!(
        shared.connection_bound(closed, busy(true, false, Some(late))),
        Some(late + secs(1))
    );
}

#[test]
fn the_grace_period_bounds_streams_longer_than_the_request_timeout() {
    let (sim, closed) = gate_closed(config(false, secs(5), secs(30)));
    assert_eq!(
        sim.shared()
            .connection_bound(closed, busy(false, true, None)),
        Some(closed + secs(30))
    );
}

#[test]
fn a_zero_request_timeout_leaves_normal_work_unbounded_and_a_zero_grace_bounds_streams_at_once() {
    let (sim, closed) = gate_closed(config(false, Duration::ZERO, Duration::ZERO));
    let shared = sim.shared();
    assert_eq!(
        shared.connection_bound(closed, busy(true, false, None)),
        None
    );
    assert_eq!(
        shared.connection_bound(closed, busy(false, true, None)),
        Some(closed + secs(1))
    );
}

#[test]
fn retry_after_mode_bounds_work_from_the_gate_not_from_the_later_stop() {
    let (mut sim, closed) = gate_closed(config(true, secs(60), secs(10)));
    sim.advance(secs(3));
    let stop = closed + secs(3);
    let shared = sim.shared();
    assert_eq!(
        shared.connection_bound(stop, busy(true, false, None)),
        Some(closed + secs(60))
    );
    // Work whose bound has passed by the stop: one second after the stop.
    assert_eq!(
        shared.connection_bound(stop, busy(false, true, None)),
        Some(closed + secs(10))
    );
    let (sim, closed) = gate_closed(config(true, secs(60), secs(1)));
    let stop = closed + secs(3);
    assert_eq!(
        sim.shared().connection_bound(stop, busy(false, true, None)),
        Some(stop + secs(1))
    );
}

#[test]
fn cuts_are_counted_by_kind_and_the_termination_counts_only_its_own() {
    let mut sim = Sim::serving(config(false, secs(60), secs(10)), |_| {});
    let shared = sim.shared();
    // Before the signal (a connection past its maximum age): counted since the start only.
    shared
        .counters()
        .count_connection_cut(CutKind::MaxConnectionAge);
    shared
        .counters()
        .note_connection_closed(Instant::from_secs(1));
    sim.stop();
    let initiated = sim
        .fired_at(LifecycleSignal::ShutdownInitiated)
        .expect("fired");
    for _ in 0..3 {
        shared.counters().count_connection_cut(CutKind::Http2Goaway);
    }
    shared
        .counters()
        .count_connection_cut(CutKind::TlsHandshake);
    shared
        .counters()
        .note_connection_closed(initiated + ms(2500));
    shared
        .counters()
        .note_connection_closed(initiated + ms(1200));
    let counts = shared.counters().peer_counts();
    assert_eq!(counts.connections_cut(), 4);
    assert_eq!(counts.cut_in_termination(CutKind::Http2Goaway), 3);
    assert_eq!(counts.cut_in_termination(CutKind::MaxConnectionAge), 0);
    assert_eq!(counts.cut_since_start[CutKind::MaxConnectionAge.index()], 1);
    assert_eq!(counts.last_connection_closed, Some(ms(2500)));
    for (i, kind) in CutKind::ALL.into_iter().enumerate() {
        assert_eq!(kind.index(), i);
    }
}

#[test]
fn the_summary_reports_the_cuts_and_the_last_close_before_the_code() {
    let mut sim = Sim::serving(config(false, secs(60), secs(10)), |_| {});
    let shared = sim.shared();
    sim.stop();
    let initiated = sim
        .fired_at(LifecycleSignal::ShutdownInitiated)
        .expect("fired");
    shared.counters().count_connection_cut(CutKind::RequestHead);
    shared
        .counters()
        .note_connection_closed(initiated + ms(3004));
    let record = TerminationSummary::new().record_shared(&shared);
    assert_eq!(record.connections_cut, 1);
    assert_eq!(record.last_connection_closed, Some(ms(3004)));
    let line = record.to_string();
    assert!(
        line.ends_with("connections_cut=1 last_connection_closed=3.004s code=-"),
        "{line}"
    );
    let text = format!("[graceful-termination] termination summary: {line}");
    assert_eq!(SummaryRecord::parse_line(&text), Some(record));
    // Nothing closed after the signal.
    let quiet = SummaryRecord::default().to_string();
    assert!(quiet.ends_with("connections_cut=0 last_connection_closed=- code=-"));
}

#[test]
fn an_aged_connection_is_closed_a_second_after_its_age_when_idle_and_at_the_grace_when_busy() {
    let config = Config::builder()
        .max_connection_age(secs(60))
        .max_connection_age_grace(secs(5))
        .build()
        .expect("valid");
    let sim = Sim::serving(config, |_| {});
    let shared = sim.shared();
    let aged = Instant::from_secs(61);
    let idle = ConnectionWork::Idle { since: aged };
    assert_eq!(
        shared.aged_connection_bound(aged, idle),
        Some(aged + secs(1))
    );
    assert_eq!(
        shared.aged_connection_bound(aged, busy(true, true, None)),
        Some(aged + secs(5))
    );
    // Without a grace, its requests keep only their own bounds.
    let sim = Sim::serving(
        Config::builder()
            .max_connection_age(secs(60))
            .build()
            .expect("valid"),
        |_| {},
    );
    assert_eq!(
        sim.shared()
            .aged_connection_bound(aged, busy(true, false, None)),
        None
    );
}
