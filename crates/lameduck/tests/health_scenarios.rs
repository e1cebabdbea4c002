//! Health answers through the lifecycle, byte for byte: ready, during shutdown, post-start
//! hooks, the livez grace period, user checks and `HasBeenReady`.

mod common;

use common::{ms, secs, Sim};
use lameduck::machine::{HookKind, HookOutcome};
use lameduck::shared::EndpointSet;
use lameduck::{Config, LifecycleSignal};

#[test]
fn ready_then_shutting_down_bodies() {
    let mut sim = Sim::serving(
        Config::builder().shutdown_delay(secs(5)).build().unwrap(),
        |_| {},
    );
    let shared = sim.shared();
    let now = sim.now;
    let ok = shared.health("/readyz", None, now).unwrap();
    assert_eq!((ok.status, ok.body.as_str()), (200, "ok"));
    assert!(shared.has_fired(LifecycleSignal::HasBeenReady));
    let verbose = shared.health("/readyz", Some("verbose"), now).unwrap();
    assert_eq!(
        verbose.body,
        "[+]ping ok\n[+]shutdown ok\nreadyz check passed\n"
    );
    let livez = shared.health("/livez", Some("verbose=1"), now).unwrap();
    assert_eq!(livez.body, "[+]ping ok\nlivez check passed\n");

    sim.stop();
    let now = sim.now;
    let red = shared.health("/readyz", None, now).unwrap();
    assert_eq!(red.status, 500);
    assert_eq!(
        red.body,
        "[+]ping ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"
    );
    let one = shared.health("/readyz/shutdown", None, now).unwrap();
    assert_eq!(
        (one.status, one.body.as_str()),
        (500, "internal server error: process is shutting down\n")
    );
    let excluded = shared
        .health("/readyz", Some("exclude=shutdown&verbose"), now)
        .unwrap();
    assert_eq!(excluded.status, 200);
    assert_eq!(
        excluded.body,
        "[+]ping ok\n[+]shutdown excluded: ok\nreadyz check passed\n"
    );
    for ep in ["/livez", "/healthz"] {
        let r = shared.health(ep, None, now).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{ep}");
    }
    assert!(shared.health("/readyzx", None, now).is_none());
    assert_eq!(shared.health("/livez/nope", None, now).unwrap().status, 404);
}

#[test]
fn livez_grace_period_covers_pending_post_start_hooks() {
    let mut hook = None;
    let cfg = Config::builder()
        .livez_grace_period(secs(10))
        .build()
        .unwrap();
    let mut sim = Sim::serving(cfg, |m| {
        hook = Some(m.add_hook(HookKind::PostStart, "x").unwrap())
    });
    let shared = sim.shared();
    let start = sim.now;
    // As kube-apiserver's TestDelayedHealthCheck: passes at t0 and t0+10s, fails after.
    assert_eq!(shared.health("/livez", None, start).unwrap().status, 200);
    assert_eq!(
        shared
            .health("/livez", None, start + secs(10))
            .unwrap()
            .status,
        200
    );
    let late = start + secs(10) + ms(1);
    let r = shared.health("/livez/poststarthook/x", None, late).unwrap();
    assert_eq!(
        (r.status, r.body.as_str()),
        (500, "internal server error: not finished\n")
    );
    // readyz and healthz have no grace.
    assert_eq!(shared.health("/healthz", None, start).unwrap().status, 500);
    sim.advance(secs(11));
    sim.finish_hook(hook.unwrap(), HookOutcome::Succeeded);
    assert_eq!(shared.health("/livez", None, sim.now).unwrap().status, 200);
    assert_eq!(shared.health("/readyz", None, sim.now).unwrap().status, 200);
}

#[test]
fn user_checks_run_in_registration_order_before_shutdown() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let healthy = Arc::new(AtomicBool::new(true));
    let h = Arc::clone(&healthy);
    let sim = Sim::serving(Config::default(), |m| {
        m.add_health_check(
            "database",
            EndpointSet::READYZ,
            Box::new(move || {
                if h.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err("connection refused".into())
                }
            }),
        )
        .unwrap();
    });
    let shared = sim.shared();
    let r = shared.health("/readyz", Some("verbose"), sim.now).unwrap();
    assert_eq!(
        r.body,
        "[+]ping ok\n[+]database ok\n[+]shutdown ok\nreadyz check passed\n"
    );
    healthy.store(false, Ordering::SeqCst);
    let r = shared.health("/readyz", None, sim.now).unwrap();
    assert_eq!(
        r.body,
        "[+]ping ok\n[-]database failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    );
    let r = shared.health("/readyz/database", None, sim.now).unwrap();
    assert_eq!(r.body, "internal server error: connection refused\n");
    // Only installed where asked.
    assert_eq!(
        shared
            .health("/livez/database", None, sim.now)
            .unwrap()
            .status,
        404
    );
}

#[test]
fn has_been_ready_fires_on_the_first_200_from_readyz_only() {
    let mut hook = None;
    let mut sim = Sim::serving(Config::default(), |m| {
        hook = Some(m.add_hook(HookKind::PostStart, "x").unwrap())
    });
    let shared = sim.shared();
    assert_eq!(shared.health("/readyz", None, sim.now).unwrap().status, 500);
    assert_eq!(
        shared.health("/readyz/ping", None, sim.now).unwrap().status,
        200
    );
    assert!(!shared.has_fired(LifecycleSignal::HasBeenReady));
    sim.advance(secs(1));
    sim.finish_hook(hook.unwrap(), HookOutcome::Succeeded);
    assert_eq!(shared.health("/readyz", None, sim.now).unwrap().status, 200);
    assert_eq!(
        shared.fired_at(LifecycleSignal::HasBeenReady),
        Some(sim.now)
    );
}

#[test]
fn has_been_ready_never_fires_after_shutdown_initiated() {
    let mut sim = Sim::serving(
        Config::builder().shutdown_delay(secs(5)).build().unwrap(),
        |_| {},
    );
    let shared = sim.shared();
    sim.stop();
    // Excluding the shutdown check makes /readyz answer 200 during the termination; that 200
    // must not publish HasBeenReady after ShutdownInitiated.
    let r = shared
        .health("/readyz", Some("exclude=shutdown"), sim.now)
        .unwrap();
    assert_eq!(r.status, 200);
    assert!(!shared.has_fired(LifecycleSignal::HasBeenReady));
    sim.check();
}

#[test]
fn every_health_path_is_routed_and_other_paths_are_not() {
    use lameduck::health::{route, Endpoint};
    for endpoint in Endpoint::ALL {
        let root = endpoint.path();
        for path in [root.to_string(), format!("{root}/"), format!("{root}/ping")] {
            assert!(route(&path).is_some(), "{path}");
        }
    }
    for path in [
        "", "/", "/sleep", "/watch", "/metrics", "/\u{e9}", "/ready", "/readyzx", "/l",
    ] {
        assert!(route(path).is_none(), "{path}");
    }
}
