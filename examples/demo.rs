//! The main demo: a real HTTP server on 127.0.0.1 with lameduck on tokio, terminated in both
//! modes while clients keep calling it. It prints a timeline of the lifecycle signals and of
//! what the clients saw, then checks the observed signal order with the reference model.
//!
//! `cargo run --example demo` (from the workspace root: the example belongs to the
//! `lameduck-demo` package, which builds only what the demo needs).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lameduck::trace::{check_trace, TraceEvent, TracedEvent};
use lameduck::{Config, LifecycleSignal};
use lameduck_demo::routes;
use lameduck_tokio::TokioRuntime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Timeline = Arc<Mutex<Vec<(Duration, String)>>>;

fn note(timeline: &Timeline, t0: Instant, line: impl Into<String>) {
    let mut t = timeline.lock().unwrap_or_else(|e| e.into_inner());
    t.push((t0.elapsed(), line.into()));
}

/// One GET on a new connection; the status line's code, or what went wrong.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return "connection refused".into()
        }
        Err(e) => return format!("error: {e}"),
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return format!("error: {e}");
    }
    let mut response = Vec::new();
    if let Err(e) = stream.read_to_end(&mut response).await {
        return format!("error: {e}");
    }
    let text = String::from_utf8_lossy(&response);
    let status = text.split_whitespace().nth(1).unwrap_or("?").to_string();
    let retry = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("retry-after:"))
        .map(|l| format!(" ({})", l.trim()))
        .unwrap_or_default();
    format!("{status}{retry}")
}

async fn run(send_retry_after: bool) -> Result<bool, Box<dyn std::error::Error>> {
    let config = Config::builder()
        .shutdown_delay(Duration::from_secs(1))
        .shutdown_send_retry_after(send_retry_after)
        .request_timeout(Duration::from_secs(10))
        .build()?;
    let mut builder = lameduck_tokio::builder(config.clone());
    // The demo terminates itself; it leaves the process's signals alone.
    builder.without_os_signals();
    let mut server = builder.prepare();
    let listener = lameduck_tokio::bind(([127, 0, 0, 1], 0).into()).await?;
    server.long_running(routes::is_long_running);
    let addr = server.serve("api", listener, routes::service(TokioRuntime))?;
    let handle = server.handle();
    let t0 = std::time::Instant::now();
    let timeline: Timeline = Arc::default();

    let clock = server.clock();
    let run = tokio::spawn(server.run());

    note(
        &timeline,
        t0,
        format!("GET /readyz -> {}", get(addr, "/readyz").await),
    );
    let slow = {
        let timeline = timeline.clone();
        note(
            &timeline,
            t0,
            "GET /sleep?duration=2s starts (in flight across the termination)",
        );
        tokio::spawn(async move {
            let status = get(addr, "/sleep?duration=2s").await;
            note(&timeline, t0, format!("GET /sleep?duration=2s -> {status}"));
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    note(&timeline, t0, "termination requested (as SIGTERM would)");
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    for path in ["/readyz", "/livez", "/"] {
        note(
            &timeline,
            t0,
            format!("GET {path} -> {}", get(addr, path).await),
        );
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    note(&timeline, t0, format!("GET / -> {}", get(addr, "/").await));
    slow.await?;
    let code = run.await??;
    note(&timeline, t0, format!("server exited with code {code}"));

    // The signals, in the order the lifecycle fired them: by instant, then DAG order (the
    // machine fires simultaneous signals in that order).
    let shared = handle.shared();
    let mut signals: Vec<(lameduck::Instant, LifecycleSignal)> = LifecycleSignal::ALL
        .into_iter()
        .filter(|s| s.is_termination())
        .filter_map(|s| shared.fired_at(s).map(|at| (at, s)))
        .collect();
    signals.sort();
    for (at, signal) in &signals {
        let t = clock.to_std(*at).saturating_duration_since(t0);
        timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((t, format!("signal {signal}")));
    }

    let mode = if send_retry_after {
        "retry-after mode: keep listening, answer 429 + Retry-After"
    } else {
        "close-listener mode: stop accepting new connections"
    };
    println!("\n=== {mode} (shutdown delay 1s) ===");
    let mut lines = timeline.lock().unwrap_or_else(|e| e.into_inner()).clone();
    lines.sort_by_key(|(t, _)| *t); // stable: same-instant lines keep their order
    for (t, line) in lines {
        println!("  {:>6.3}s  {line}", t.as_secs_f64());
    }
    let mut trace: Vec<TracedEvent> = signals
        .iter()
        .map(|(_, s)| TracedEvent::untimed(TraceEvent::Signal(*s)))
        .collect();
    trace.push(TracedEvent::untimed(TraceEvent::Exit(code)));
    let verdict = check_trace(&config, &trace);
    match &verdict {
        Ok(_) => println!("  reference model: the observed signal order is legal"),
        Err(v) => println!("  reference model: ILLEGAL: {v}"),
    }
    Ok(verdict.is_ok() && code == 0)
}

#[tokio::main]
async fn main() {
    let mut ok = true;
    for send_retry_after in [false, true] {
        match run(send_retry_after).await {
            Ok(good) => ok &= good,
            Err(e) => {
                eprintln!("demo failed: {e}");
                ok = false;
            }
        }
    }
    std::process::exit(if ok { 0 } else { 1 });
}
