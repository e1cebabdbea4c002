use std::time::Duration;

use lameduck::machine::{HookOutcome, StopSource};
use lameduck::{Config, Event, Input, Instant, Lifecycle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::builder().shutdown_delay(Duration::from_secs(5));
    let mut cfg = Lifecycle::new(config.build()?);
    let api = cfg.add_listener("api")?;
    let hook = cfg.add_pre_shutdown_hook("deregister")?;
    let prepared = cfg.prepare();
    let shared = prepared.shared().clone(); // for request handlers: admission and health
    let mut now = Instant::ZERO; // a simulated clock: the machine never reads one itself
    let mut lifecycle = prepared.start(now);
    lifecycle.handle_input(Input::ListenerServing(api), now)?;
    let mut sigterm = Some(Instant::from_secs(1)); // the simulated SIGTERM
    loop {
        while let Some(event) = lifecycle.poll_event() {
            let readyz = shared.health("/readyz", None, now).map_or(0, |r| r.status);
            println!("{:?} /readyz {readyz}: {event:?}", now.since_epoch());
            match event {
                Event::RunPreShutdownHooks => {
                    let outcome = HookOutcome::Succeeded; // a real driver runs the hook first
                    lifecycle.handle_input(Input::HookFinished { hook, outcome }, now)?;
                }
                Event::StopListening { .. } => {
                    // A real driver closes the listener, then reports it.
                    lifecycle.handle_input(Input::ListenerStopped(api), now)?;
                    lifecycle.handle_input(Input::ServerStopped(api), now)?;
                }
                Event::Exit { code, .. } => std::process::exit(code.into()),
                _ => {} // log signals, notify systemd, ...
            }
        }
        // A real driver sleeps until the next deadline or input; here time jumps there.
        if let Some(at) = sigterm.take() {
            now = at;
            lifecycle.request_stop(StopSource::OsSignal, now)?; // what a driver does on SIGTERM
        } else {
            now = lifecycle.poll_timeout().ok_or("no deadline and no exit")?;
            lifecycle.handle_timeout(now);
        }
    }
}
