//! What a request that reaches the server after the gate closed gets, by the connection it
//! came on, and how long a connection waiting for a request is kept open at the stop.

mod common;

use std::time::Duration;

use common::{config, secs, Sim};
use lameduck::connection::IDLE_CONNECTION_LINGER;
use lameduck::responses::SHUTTING_DOWN;
use lameduck::{Admission, Config, ConnectionKind, LifecycleSignal, RequestClass, ShutdownMode};

/// A simulator past `NotAcceptingNewRequest`, its sockets outliving it or not.
fn closed(mode: ShutdownMode, outlive: bool) -> Sim {
    let mut sim = Sim::serving(config(mode, secs(1)), |_| {});
    if outlive {
        sim.shared().set_sockets_outlive();
    }
    sim.stop();
    sim.advance(secs(1));
    assert!(sim
        .machine
        .has_fired(LifecycleSignal::NotAcceptingNewRequest));
    sim
}

/// What `class` on a connection of `kind` gets: "served", "late", "503" or "429".
fn answer(sim: &Sim, class: RequestClass, kind: ConnectionKind) -> &'static str {
    match sim.shared().admit_on(class, kind) {
        Admission::Normal(_) | Admission::LongRunning(_) => "served",
        Admission::Late(c) => {
            assert_eq!(c, class);
            "late"
        }
        Admission::Rejected(r) => match r.response().status {
            503 => "503",
            429 => "429",
            s => panic!("unexpected status {s}"),
        },
        Admission::Exempt(_) => panic!("exempt"),
    }
}

#[test]
fn before_the_close_every_kind_is_admitted_and_tracked() {
    let sim = Sim::serving(config(ShutdownMode::CloseListener, secs(1)), |_| {});
    for kind in [
        ConnectionKind::Unknown,
        ConnectionKind::Http1,
        ConnectionKind::Http2,
    ] {
        assert_eq!(answer(&sim, RequestClass::Normal, kind), "served");
        assert_eq!(answer(&sim, RequestClass::LongRunning, kind), "served");
    }
}

#[test]
fn close_listener_mode_behind_a_balancer_serves_http2_streams_and_turns_http1_away_with_a_close() {
    let sim = closed(ShutdownMode::CloseListener, false);
    for class in [RequestClass::Normal, RequestClass::LongRunning] {
        // A stream the server got arrived before its final GOAWAY.
        assert_eq!(answer(&sim, class, ConnectionKind::Http2), "late");
        // kube-apiserver's 503 Retry-After: 1, and the connection closes after it.
        assert_eq!(answer(&sim, class, ConnectionKind::Http1), "503");
        assert_eq!(answer(&sim, class, ConnectionKind::Unknown), "503");
    }
    assert_eq!(SHUTTING_DOWN.header("Connection"), Some("close"));
    assert_eq!(sim.shared().counters().served_after_close(), 2);
    assert_eq!(
        sim.shared().counters().rejections().total(),
        4,
        "every rejection is counted, no late request is"
    );
}

#[test]
fn with_sockets_that_outlive_the_process_every_connection_it_serves_is_answered() {
    for mode in [ShutdownMode::CloseListener, ShutdownMode::SendRetryAfter] {
        let sim = closed(mode, true);
        for class in [RequestClass::Normal, RequestClass::LongRunning] {
            assert_eq!(
                answer(&sim, class, ConnectionKind::Http1),
                "late",
                "{mode:?}"
            );
            assert_eq!(
                answer(&sim, class, ConnectionKind::Http2),
                "late",
                "{mode:?}"
            );
        }
        let rejected = answer(&sim, RequestClass::Normal, ConnectionKind::Unknown);
        assert_eq!(
            rejected,
            if mode == ShutdownMode::CloseListener {
                "503"
            } else {
                "429"
            }
        );
    }
}

#[test]
fn retry_after_mode_keeps_its_429_for_new_work_behind_a_balancer() {
    let sim = closed(ShutdownMode::SendRetryAfter, false);
    for kind in [
        ConnectionKind::Unknown,
        ConnectionKind::Http1,
        ConnectionKind::Http2,
    ] {
        assert_eq!(answer(&sim, RequestClass::Normal, kind), "429");
    }
}

#[test]
fn an_idle_connection_is_kept_for_its_next_request_only_while_its_client_may_still_send_one() {
    // Alone on its sockets (behind a balancer): idle keep-alive connections close at the
    // stop; one that never carried a request waits for its first one.
    let sim = closed(ShutdownMode::CloseListener, false);
    let now = sim.now;
    assert_eq!(sim.shared().idle_close_at(false, now), now);
    assert_eq!(
        sim.shared().idle_close_at(true, now),
        now + IDLE_CONNECTION_LINGER
    );

    // Sockets outlive the process, with a shutdown delay of 0: the stop comes right after
    // ShutdownInitiated, and idle connections get the linger from there.
    let mut sim = Sim::serving(config(ShutdownMode::CloseListener, Duration::ZERO), |_| {});
    sim.shared().set_sockets_outlive();
    sim.stop();
    let initiated = sim
        .fired_at(LifecycleSignal::ShutdownInitiated)
        .expect("fired");
    let now = sim.now;
    assert_eq!(
        sim.shared().idle_close_at(false, now),
        initiated + IDLE_CONNECTION_LINGER
    );

    // With a shutdown delay at least as long, keep-alive ended long before the stop.
    let sim = closed(ShutdownMode::CloseListener, true);
    let now = sim.now;
    assert_eq!(sim.shared().idle_close_at(false, now), now);
}

/// A simulator past the stop of `mode` (close-listener: `NotAcceptingNewRequest`, 1 s after
/// the signal; retry-after: the drain's end) with the idle-close spread `spread`, and when
/// the server stopped listening.
fn stopped_with_spread(mode: ShutdownMode, spread: Duration) -> (Sim, lameduck::Instant) {
    let config = config(mode, secs(1))
        .to_builder()
        .idle_close_spread(spread)
        .build()
        .expect("valid");
    let mut sim = Sim::serving(config, |_| {});
    sim.stop();
    sim.advance(secs(1));
    let stop = match mode {
        ShutdownMode::CloseListener => LifecycleSignal::NotAcceptingNewRequest,
        ShutdownMode::SendRetryAfter => LifecycleSignal::InFlightRequestsDrained,
    };
    let at = sim.fired_at(stop).expect("the server stopped listening");
    (sim, at)
}

#[test]
fn without_the_spread_every_connection_ends_when_it_would_have() {
    let (sim, _) = stopped_with_spread(ShutdownMode::CloseListener, Duration::ZERO);
    let shared = sim.shared();
    let now = sim.now;
    for sample in [0, 1 << 31, u32::MAX] {
        let start = shared.idle_close_window_start(now);
        assert_eq!(shared.spread_close_at(None, start, now, sample), now);
        assert_eq!(shared.spread_close_at(Some(false), start, now, sample), now);
        assert_eq!(
            shared.spread_close_at(Some(true), start, now, sample),
            now + IDLE_CONNECTION_LINGER
        );
    }
}

#[test]
fn with_the_spread_each_connection_ends_at_its_own_point_of_the_window_from_the_stop() {
    for mode in [ShutdownMode::CloseListener, ShutdownMode::SendRetryAfter] {
        let spread = Duration::from_millis(1500);
        let (mut sim, stop) = stopped_with_spread(mode, spread);
        // The connection sees the stop a little late (a busy task): its point is still
        // measured from the stop, so the window is the same for every connection.
        sim.advance(Duration::from_millis(20));
        let shared = sim.shared();
        let now = sim.now;
        assert!(now > stop, "{mode:?}");
        assert_eq!(shared.idle_close_window_start(now), stop, "{mode:?}");
        let start = shared.idle_close_window_start(now);
        let at = |waits, sample| shared.spread_close_at(waits, start, now, sample);
        assert_eq!(at(Some(false), 1 << 31), stop + Duration::from_millis(750));
        assert_eq!(at(None, 1 << 30), stop + Duration::from_millis(375));
        assert_eq!(
            at(Some(false), u32::MAX),
            stop + (spread - Duration::from_nanos(1))
        );
        // A point the connection saw too late for is now: never in the past.
        assert_eq!(at(Some(false), 0), now);
        // A connection that never carried a request still waits for it at least as long
        // as without the spread.
        assert_eq!(at(Some(true), 0), now + IDLE_CONNECTION_LINGER);
        assert_eq!(
            at(Some(true), u32::MAX),
            stop + (spread - Duration::from_nanos(1))
        );
        // Uniform samples fall evenly over the window's 100 ms buckets.
        let mut buckets = [0usize; 15];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..15_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let sample = u32::try_from(state >> 32).expect("32 bits");
            let point = at(None, sample).saturating_duration_since(stop);
            assert!(point < spread, "{point:?}");
            let bucket = usize::try_from(point.as_millis() / 100).expect("small");
            buckets[bucket] += 1;
        }
        // 1,000 expected per bucket; a binomial's deviation is about 30.
        assert!(
            buckets.iter().all(|&b| (850..=1150).contains(&b)),
            "{mode:?}: {buckets:?}"
        );
    }
}

#[test]
fn before_the_stop_the_window_starts_when_the_connection_sees_it() {
    // An adapter stopped by other means than the lifecycle's stop (before its signal fired)
    // measures the window from its own `now`, or from when it told its connections.
    let config = Config::builder()
        .idle_close_spread(secs(1))
        .build()
        .expect("valid");
    let sim = Sim::serving(config, |_| {});
    let now = sim.now;
    let shared = sim.shared();
    assert_eq!(shared.idle_close_window_start(now), now);
    assert_eq!(
        shared.spread_close_at(None, now, now, 1 << 31),
        now + Duration::from_millis(500)
    );
    let later = now + Duration::from_millis(100);
    assert_eq!(
        shared.spread_close_at(None, now, later, 1 << 31),
        now + Duration::from_millis(500)
    );
    assert_eq!(shared.spread_close_at(None, now, later, 1 << 20), later);
}
