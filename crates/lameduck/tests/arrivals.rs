//! What the server sees of its load balancer, on the simulated clock: when new connections and
//! requests arrived during a termination, which were late, and requests before ready.

mod common;

use common::{config, ms, secs, Sim};
use lameduck::machine::{HookKind, HookOutcome};
use lameduck::shared::counters::{ArrivalCounts, RequestArrival};
use lameduck::{Admission, Config, ConfigError, ConnectionKind, RequestClass, ShutdownMode};

/// A connection and a request, as an adapter reports them at the simulator's `now`.
fn arrive(sim: &Sim) {
    let shared = sim.shared();
    assert!(
        shared.counters().watching_arrivals(),
        "watching at {:?}",
        sim.now
    );
    shared.counters().note_connection(sim.now);
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::Noted
    );
}

#[test]
fn a_serving_server_watches_nothing_and_records_nothing() {
    let sim = Sim::serving(config(ShutdownMode::CloseListener, secs(2)), |_| {});
    let shared = sim.shared();
    assert!(!shared.counters().watching_arrivals());
    // An adapter that reports anyway changes nothing.
    shared.counters().note_connection(sim.now);
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::Noted
    );
    assert_eq!(shared.counters().arrivals(), ArrivalCounts::default());
}

#[test]
fn a_balancer_that_stops_in_time_leaves_no_late_arrival() {
    let mut sim = Sim::serving(config(ShutdownMode::CloseListener, secs(2)), |_| {});
    sim.advance(secs(10));
    sim.stop();
    sim.advance(ms(300));
    arrive(&sim);
    sim.advance(ms(900)); // 1.2 s after the signal: still in the first 80 % (1.6 s)
    arrive(&sim);
    sim.advance(secs(1)); // NotAcceptingNewRequest at 2 s
    let a = sim.shared().counters().arrivals();
    assert_eq!(a.last_new_connection, Some(ms(1200)));
    assert_eq!(a.last_new_request, Some(ms(1200)));
    assert_eq!((a.late_connections, a.late_requests), (0, 0));
    assert!(!a.has_late_connections());
    // The listener stopped: nothing is watched any more.
    assert!(!sim.shared().counters().watching_arrivals());
}

#[test]
fn arrivals_in_the_last_fifth_of_the_delay_are_late() {
    let mut sim = Sim::serving(config(ShutdownMode::CloseListener, secs(2)), |_| {});
    sim.stop();
    sim.advance(ms(1599));
    arrive(&sim);
    assert_eq!(sim.shared().counters().arrivals().late_connections, 0);
    sim.advance(ms(1)); // 1.6 s: the late part begins
    arrive(&sim);
    sim.advance(ms(300)); // 1.9 s
    arrive(&sim);
    let a = sim.shared().counters().arrivals();
    assert_eq!(a.last_new_connection, Some(ms(1900)));
    assert_eq!((a.late_connections, a.late_requests), (2, 2));
    assert!(a.has_late_connections());
}

#[test]
fn the_late_part_is_configurable() {
    let config = Config::builder()
        .shutdown_delay(secs(2))
        .late_arrival_percent(50)
        .build()
        .expect("valid");
    assert_eq!(config.late_arrivals_from(), secs(1));
    let mut sim = Sim::serving(config, |_| {});
    sim.stop();
    sim.advance(ms(1100));
    arrive(&sim);
    assert_eq!(sim.shared().counters().arrivals().late_connections, 1);
    let err = Config::builder()
        .late_arrival_percent(101)
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        ConfigError::LateArrivalPercent { value: 101 }
    ));
    assert_eq!(
        err.to_string(),
        "late_arrival_percent must be from 0 to 100, got 101"
    );
}

#[test]
fn retry_after_mode_counts_connections_accepted_and_requests_turned_away_after_the_delay() {
    let mut sim = Sim::serving(config(ShutdownMode::SendRetryAfter, secs(1)), |_| {});
    let shared = sim.shared();
    // A request in flight keeps the listener open after the delay.
    let in_flight = shared.admit(RequestClass::Normal);
    sim.stop();
    sim.advance(ms(500));
    arrive(&sim);
    sim.advance(ms(600)); // past NotAcceptingNewRequest at 1 s; the listener is still open
    assert!(shared.counters().watching_arrivals());
    shared.counters().note_connection(sim.now);
    // Not noted as a new request: admission turns it away, and counts it late.
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::Noted
    );
    assert!(matches!(
        shared.admit_on(RequestClass::Normal, ConnectionKind::Http1),
        Admission::Rejected(_)
    ));
    let a = shared.counters().arrivals();
    // The latest connection before the delay ended; the one after it is late.
    assert_eq!(a.last_new_connection, Some(ms(500)));
    assert_eq!(a.last_new_request, Some(ms(500)));
    assert_eq!((a.late_connections, a.late_requests), (1, 1));
    drop(in_flight);
}

#[test]
fn requests_while_readyz_says_not_ready_are_counted_once_it_was_asked() {
    let mut hook = None;
    let mut sim = Sim::serving(config(ShutdownMode::CloseListener, secs(1)), |m| {
        hook = Some(m.add_hook(HookKind::PostStart, "warm-up").expect("hook"));
    });
    let shared = sim.shared();
    // Never asked: a server without a readiness probe counts nothing.
    assert!(!shared.counters().watching_arrivals());
    // The probe asks while the post-start hook runs: not ready.
    let health = shared
        .health("/readyz", None, sim.now)
        .expect("health path");
    assert_ne!(health.status, 200);
    assert!(shared.counters().watching_arrivals());
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::FirstBeforeReady
    );
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::Noted
    );
    assert_eq!(shared.counters().arrivals().requests_before_ready, 2);
    // The hook finishes, the probe says ready: no more counting.
    sim.finish_hook(hook.expect("the hook"), HookOutcome::Succeeded);
    sim.advance(ms(10));
    let health = shared
        .health("/readyz", None, sim.now)
        .expect("health path");
    assert_eq!(health.status, 200);
    assert!(!shared.counters().watching_arrivals());
    assert_eq!(
        shared.counters().note_request(sim.now),
        RequestArrival::Noted
    );
    assert_eq!(shared.counters().arrivals().requests_before_ready, 2);
}

#[test]
fn readiness_probes_give_the_probe_period_and_the_failed_probes() {
    let mut sim = Sim::serving(config(ShutdownMode::CloseListener, secs(2)), |_| {});
    let shared = sim.shared();
    let probe = |sim: &Sim| {
        shared
            .health("/readyz", None, sim.now)
            .expect("health path")
            .status
    };
    // A balancer probing every 2 s; other health paths do not count.
    assert_eq!(probe(&sim), 200);
    assert_eq!(shared.counters().arrivals().readyz_probe_interval, None);
    sim.advance(secs(2));
    assert_eq!(probe(&sim), 200);
    sim.advance(ms(1500));
    let _ = shared.health("/livez", None, sim.now);
    sim.advance(ms(500));
    assert_eq!(probe(&sim), 200);
    assert_eq!(
        shared.counters().arrivals().readyz_probe_interval,
        Some(secs(2))
    );
    sim.advance(ms(100));
    assert!(shared.readyz_is_ready(sim.now));
    assert_eq!(
        shared.counters().arrivals().readyz_probe_interval,
        Some(secs(2))
    );
    // The signal 0.7 s later; the probe after it fails and is counted, not timed.
    sim.advance(ms(700));
    sim.stop();
    sim.advance(ms(1300));
    assert_ne!(probe(&sim), 200);
    sim.advance(ms(100));
    assert_ne!(probe(&sim), 200);
    let a = shared.counters().arrivals();
    assert_eq!(a.readyz_probe_interval, Some(secs(2)));
    assert_eq!(a.failed_readyz_probes, 2);
    // A per-check path is not the balancer's probe, nor the adapter's own evaluation.
    let _ = shared.health("/readyz/shutdown", None, sim.now);
    assert!(!shared.readyz_is_ready(sim.now));
    assert_eq!(shared.counters().arrivals().failed_readyz_probes, 2);
}
