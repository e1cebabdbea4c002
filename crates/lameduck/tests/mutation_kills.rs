//! Exact outputs the rest of the suite left open, each found by a mutant `cargo-mutants`
//! showed surviving (`docs/mutation-testing.md` lists them with the test that now kills each).

use std::sync::Arc;

use lameduck::health::parse_query;
use lameduck::{Config, Gate, HookKind, Machine, Rejection, Shared, ShutdownMode};

fn prepared(setup: impl FnOnce(&mut Machine)) -> (Machine, Arc<Shared>) {
    let mut m = Machine::new(Config::default());
    setup(&mut m);
    m.handle_input(lameduck::Input::Prepare, lameduck::Instant::ZERO)
        .unwrap();
    let shared = m.shared().unwrap().clone();
    (m, shared)
}

#[test]
fn rejections_display_their_status() {
    assert_eq!(
        Rejection::ShuttingDown.to_string(),
        "server is shutting down (503)"
    );
    assert_eq!(
        Rejection::RetryAfter.to_string(),
        "server is shutting down, retry later (429)"
    );
}

#[test]
fn gate_debug_shows_its_counts_and_mode() {
    let gate = Gate::new(ShutdownMode::SendRetryAfter);
    let _a = gate.admit_normal().unwrap();
    let _b = gate.admit_long_running().unwrap();
    let _c = gate.admit_long_running().unwrap();
    assert_eq!(
        format!("{gate:?}"),
        "Gate { closed: false, normal: 1, long_running: 2, mode: SendRetryAfter }"
    );
}

#[test]
fn gate_reports_its_mode() {
    assert_eq!(
        Gate::new(ShutdownMode::SendRetryAfter).mode(),
        ShutdownMode::SendRetryAfter
    );
    assert_eq!(
        Gate::new(ShutdownMode::CloseListener).mode(),
        ShutdownMode::CloseListener
    );
}

#[test]
fn tickets_debug_as_their_kind() {
    let gate = Gate::new(ShutdownMode::CloseListener);
    assert_eq!(
        format!("{:?}", gate.admit_normal().unwrap()),
        "NormalTicket"
    );
    assert_eq!(
        format!("{:?}", gate.admit_long_running().unwrap()),
        "LongRunningTicket"
    );
    let (_m, shared) = prepared(|_| {});
    let owned = |class| match shared.admit(class) {
        lameduck::Admission::Normal(t) => format!("{t:?}"),
        lameduck::Admission::LongRunning(t) => format!("{t:?}"),
        other => panic!("{other:?}"),
    };
    assert_eq!(owned(lameduck::RequestClass::Normal), "OwnedNormalTicket");
    assert_eq!(
        owned(lameduck::RequestClass::LongRunning),
        "OwnedLongRunningTicket"
    );
}

#[test]
fn a_query_of_plus_signs_only_is_decoded() {
    let q = parse_query(Some("exclude=+&exclude=++"));
    assert_eq!(
        q.excludes().collect::<Vec<_>>(),
        [b" ".as_slice(), b"  ".as_slice()]
    );
}

#[test]
fn the_machine_names_what_was_registered() {
    let mut m = Machine::new(Config::default());
    let hook = m.add_hook(HookKind::AfterDrain, "flush").unwrap();
    let api = m.add_listener("api").unwrap();
    let admin = m.add_listener("admin").unwrap();
    let mux = m.add_mux_signal("routes").unwrap();
    assert_eq!(m.hook_kind(hook), Some(HookKind::AfterDrain));
    assert_eq!(m.hook_name(hook), Some("flush"));
    assert_eq!(m.listener_name(api), Some("api"));
    assert_eq!(m.listener_name(admin), Some("admin"));
    assert_eq!(m.mux_signal_name(mux), Some("routes"));
    assert_eq!(
        m.listeners().collect::<Vec<_>>(),
        [(api, "api"), (admin, "admin")]
    );
}

#[test]
fn machine_debug_shows_phase_timers_and_pending_events() {
    let (mut m, _) = prepared(|m| {
        m.add_listener("api").unwrap();
    });
    m.handle_input(lameduck::Input::Start, lameduck::Instant::ZERO)
        .unwrap();
    // One event waits to be polled; no timer is armed before a stop.
    assert_eq!(
        format!("{m:?}"),
        "Machine { phase: Starting, timers: TimerTable([None, None, None, None, None, None, \
         None]), pending_events: 1, .. }"
    );
}

#[test]
fn pending_events_are_reported_until_polled() {
    let (mut m, _) = prepared(|m| {
        m.add_listener("api").unwrap();
    });
    assert!(!m.has_pending_events());
    m.handle_input(lameduck::Input::Start, lameduck::Instant::ZERO)
        .unwrap();
    assert!(m.has_pending_events());
    while m.poll_event().is_some() {}
    assert!(!m.has_pending_events());
}

#[test]
fn endpoint_sets_unite() {
    use lameduck::{Endpoint, EndpointSet};
    let both = EndpointSet::READYZ.union(EndpointSet::LIVEZ);
    assert!(both.contains(Endpoint::Readyz) && both.contains(Endpoint::Livez));
    assert!(!both.contains(Endpoint::Healthz));
    // Overlapping sets: a bit in both stays.
    assert_eq!(
        EndpointSet::ALL.union(EndpointSet::READYZ),
        EndpointSet::ALL
    );
    assert_eq!(
        EndpointSet::READYZ.union(EndpointSet::READYZ),
        EndpointSet::READYZ
    );
}

#[test]
fn shared_holds_the_machines_configuration_and_debugs_its_state() {
    let config = Config::builder()
        .shutdown_delay(std::time::Duration::from_secs(3))
        .shutdown_send_retry_after(true)
        .build()
        .unwrap();
    let mut m = Machine::new(config.clone());
    m.add_health_check("db", lameduck::EndpointSet::READYZ, Box::new(|| Ok(())))
        .unwrap();
    m.handle_input(lameduck::Input::Prepare, lameduck::Instant::ZERO)
        .unwrap();
    let shared = m.shared().unwrap();
    assert_eq!(shared.config(), &config);
    assert_eq!(
        format!("{shared:?}"),
        "Shared { fired: {}, gate: Gate { closed: false, normal: 0, long_running: 0, \
         mode: SendRetryAfter }, checks: [\"ping\", \"db\", \"shutdown\"], .. }"
    );
}
