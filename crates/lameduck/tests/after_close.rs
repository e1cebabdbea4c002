//! What a request that reaches the server after the gate closed gets, by the connection it
//! came on, and how long a connection waiting for a request is kept open at the stop.

mod common;

use std::time::Duration;

use common::{secs, Sim};
use lameduck::responses::SHUTTING_DOWN;
use lameduck::{
    Admission, Config, ConnectionKind, LifecycleSignal, RequestClass, ShutdownMode,
    IDLE_CONNECTION_LINGER,
};

fn config(mode: ShutdownMode, delay: Duration) -> Config {
    Config::builder()
        .shutdown_send_retry_after(mode == ShutdownMode::SendRetryAfter)
        .shutdown_delay(delay)
        .build()
        .expect("valid")
}

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
    assert_eq!(sim.shared().served_after_close(), 2);
    assert_eq!(
        sim.shared().rejections().total(),
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
