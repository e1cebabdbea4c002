//! The main demo: a graceful termination in both modes, driven through the core state machine
//! with a simulated clock, printed as a timeline.
//!
//! `cargo run --example demo`

use std::time::Duration;

use lameduck::sim::Simulator;
use lameduck::{Admission, Config, Event, HookKind, HookOutcome, RequestClass, Signal};

fn main() {
    for send_retry_after in [false, true] {
        if let Err(e) = run(send_retry_after) {
            eprintln!("demo failed: {e}");
            std::process::exit(1);
        }
    }
}

fn run(send_retry_after: bool) -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::builder()
        .shutdown_delay(Duration::from_secs(2))
        .shutdown_send_retry_after(send_retry_after)
        .shutdown_watch_termination_grace_period(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(10))
        .build()?;
    let mode = if send_retry_after { "B (429 + Retry-After)" } else { "A (close listener)" };
    println!("\n=== mode {mode}: delay 2s, pre-shutdown hook 3s, watch grace 1s ===");
    let mut hook = None;
    let mut sim = Simulator::serving(config, |m| {
        hook = m.add_hook(HookKind::PreShutdown, "deregister").ok();
    })?;
    let shared = sim.shared().ok_or("not prepared")?;
    let show = |sim: &Simulator, what: &str| println!("  {:>7.3}s  {what}", sim.now.since_epoch().as_secs_f64());
    let client = |sim: &Simulator, path: &str| {
        let now = sim.now;
        if let Some(h) = shared.health(path, None, now) {
            return format!("GET {path} -> {}", h.status);
        }
        if shared.has_fired(Signal::HTTPServerStoppedListening) {
            return format!("GET {path} -> connection refused");
        }
        match shared.admit(RequestClass::Normal) {
            Admission::Rejected(r) => format!("GET {path} -> {}", r.response().status),
            _ => format!("GET {path} -> 200"),
        }
    };

    show(&sim, &client(&sim, "/readyz"));
    let in_flight = shared.admit(RequestClass::Normal);
    show(&sim, "a slow request (4s) starts");
    sim.advance(Duration::from_millis(500));
    sim.stop()?;
    show(&sim, "SIGTERM");
    let mut printed = 0;
    let mut print_new = |sim: &Simulator, printed: &mut usize| {
        for (at, e) in &sim.log[*printed..] {
            let line = match e {
                Event::Signal { signal, .. } if signal.is_termination() => format!("signal {signal}"),
                Event::StopListening { .. } => "listener stops".to_string(),
                Event::Exit { code, reason } => format!("exit {code} ({reason})"),
                _ => continue,
            };
            println!("  {:>7.3}s  {line}", at.since_epoch().as_secs_f64());
        }
        *printed = sim.log.len();
    };
    print_new(&sim, &mut printed);
    show(&sim, &client(&sim, "/readyz"));
    show(&sim, &client(&sim, "/livez"));
    show(&sim, &client(&sim, "/api"));
    sim.advance(Duration::from_secs(3));
    print_new(&sim, &mut printed);
    if let Some(h) = hook {
        sim.finish_hook(h, HookOutcome::Succeeded)?;
        show(&sim, "pre-shutdown hook `deregister` done");
    }
    print_new(&sim, &mut printed);
    show(&sim, &client(&sim, "/api"));
    sim.advance(Duration::from_secs(1));
    drop(in_flight);
    show(&sim, "the slow request completes with 200");
    sim.run_to_exit(100);
    print_new(&sim, &mut printed);
    let summary = sim.check_trace()?;
    println!("  reference model: trace legal, exit code {:?}", summary.exit_code);
    Ok(())
}
