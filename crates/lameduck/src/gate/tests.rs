use super::*;
use alloc::vec::Vec;

#[test]
fn the_retry_after_hint_is_the_responses_header() {
    for rejection in [Rejection::NotAccepting, Rejection::RetryAfter] {
        let header = rejection
            .response()
            .headers
            .iter()
            .find(|(name, _)| *name == "Retry-After")
            .map(|(_, value)| *value);
        let secs = alloc::format!("{}", rejection.retry_after().as_secs());
        assert_eq!(header, Some(secs.as_str()));
    }
}

#[test]
fn admits_until_closed_then_rejects_by_mode() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    let a = gate.admit_normal().unwrap();
    let w = gate.admit_long_running().unwrap();
    assert_eq!(gate.close(), (1, 1));
    assert_eq!(gate.admit_normal().unwrap_err(), Rejection::NotAccepting);
    assert_eq!(
        gate.admit_long_running().unwrap_err(),
        Rejection::NotAccepting
    );
    assert!(!gate.normal_drained());
    drop(a);
    assert!(gate.normal_drained());
    assert!(!gate.long_running_drained());
    drop(w);
    assert!(gate.long_running_drained());

    let b = Gate::new(ShutdownMode::SendRetryAfter);
    b.close();
    assert_eq!(b.admit_normal().unwrap_err(), Rejection::RetryAfter);
}

#[test]
fn close_is_idempotent_and_counts() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    let tickets: Vec<_> = (0..5).map(|_| gate.admit_normal().unwrap()).collect();
    assert_eq!(gate.normal_in_flight(), 5);
    assert_eq!(gate.close(), (5, 0));
    assert_eq!(gate.close(), (5, 0));
    drop(tickets);
    assert_eq!(gate.normal_in_flight(), 0);
    assert!(gate.normal_drained());
}

#[test]
fn last_release_notifies_listeners() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    let t = gate.admit_normal().unwrap();
    gate.close();
    let listener = gate.listen();
    drop(t);
    // The release notified: a blocking wait returns at once.
    #[cfg(feature = "std")]
    assert!(
        event_listener::Listener::wait_timeout(listener, std::time::Duration::from_secs(5))
            .is_some()
    );
    #[cfg(not(feature = "std"))]
    drop(listener);
}

#[test]
fn pacing_is_burst_one_at_the_interval_until_the_deadline() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    let tickets: Vec<_> = (0..4).map(|_| gate.admit_long_running().unwrap()).collect();
    let t0 = Instant::from_secs(10);
    // Not draining yet: no pacing.
    assert_eq!(tickets[0].reserve_turn(t0), None);
    gate.close();
    gate.start_pacing(t0, Duration::from_millis(5), t0 + Duration::from_millis(12));
    // The first goes at once (burst 1), the next ones every 5 ms.
    assert_eq!(tickets[0].reserve_turn(t0), None);
    assert_eq!(
        tickets[1].reserve_turn(t0),
        Some(t0 + Duration::from_millis(5))
    );
    assert_eq!(
        tickets[2].reserve_turn(t0),
        Some(t0 + Duration::from_millis(10))
    );
    // The next turn (15 ms) is past the deadline (12 ms): no wait.
    assert_eq!(tickets[3].reserve_turn(t0), None);
}

#[test]
fn pacing_does_not_bank_tokens_while_idle() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    let t0 = Instant::ZERO;
    gate.start_pacing(t0, Duration::from_millis(10), Instant::from_secs(100));
    let a = gate.admit_long_running().unwrap();
    assert_eq!(a.reserve_turn(Instant::from_secs(1)), None);
    // Burst 1: only one immediate completion after a long idle period.
    assert_eq!(
        a.reserve_turn(Instant::from_secs(1)),
        Some(Instant::from_secs(1) + Duration::from_millis(10))
    );
}
