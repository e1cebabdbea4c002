//! gRPC load for the rolling-restart proof (`tests/rolling/rolling_restart_grpc.py`): unary
//! `Sleep` calls of the gRPC example server through tonic's client, for a fixed time, on
//! several HTTP/2 connections with several calls in flight on each; prints one JSON line
//! with the counts (calls, ok, failed, failures by gRPC code) and exits 0.
//!
//! `cargo run --release --example grpc_load -- --target http://127.0.0.1:8080 --connections 8 --concurrency 4 --duration 16s --sleep 20ms`

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lameduck_suite::grpc::{DemoClient, SleepRequest};
use tonic::transport::Endpoint;

/// Calls made, calls that ended OK, and the failures by status.
type Counts = (u64, u64, BTreeMap<String, u64>);

struct Args {
    target: String,
    connections: usize,
    concurrency: usize,
    duration: Duration,
    sleep: String,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        target: "http://127.0.0.1:8080".into(),
        connections: 8,
        concurrency: 4,
        duration: Duration::from_secs(16),
        sleep: "20ms".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => args.target = value()?,
            "--connections" => {
                args.connections = value()?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?
            }
            "--concurrency" => {
                args.concurrency = value()?
                    .parse()
                    .map_err(|e| format!("--concurrency: {e}"))?
            }
            "--duration" => {
                args.duration =
                    lameduck::parse_duration(&value()?).map_err(|e| format!("--duration: {e}"))?
            }
            "--sleep" => args.sleep = value()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let endpoint = match Endpoint::from_shared(args.target.clone()) {
        Ok(e) => e.connect_timeout(Duration::from_secs(2)),
        Err(e) => {
            eprintln!("error: --target: {e}");
            std::process::exit(2);
        }
    };
    let counts: Arc<Mutex<Counts>> = Arc::default();
    let end = Instant::now() + args.duration;
    let mut tasks = Vec::new();
    for _ in 0..args.connections.max(1) {
        // One HTTP/2 connection each; tonic reconnects it if it ever closes.
        let channel = endpoint.connect_lazy();
        for _ in 0..args.concurrency.max(1) {
            let mut client = DemoClient::new(channel.clone());
            let counts = Arc::clone(&counts);
            let sleep = args.sleep.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let mut request = tonic::Request::new(SleepRequest {
                        duration: sleep.clone(),
                    });
                    request.set_timeout(Duration::from_secs(5));
                    let result = client.sleep(request).await;
                    let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
                    c.0 += 1;
                    match result {
                        Ok(_) => c.1 += 1,
                        Err(status) => {
                            let key = format!("{:?}: {}", status.code(), status.message());
                            *c.2.entry(key).or_default() += 1;
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let (calls, ok, failures) = &*counts.lock().unwrap_or_else(|p| p.into_inner());
    let failures: Vec<String> = failures
        .iter()
        .map(|(k, v)| format!("{:?}: {v}", k.replace('"', "'")))
        .collect();
    println!(
        "{{\"calls\": {calls}, \"ok\": {ok}, \"failed\": {}, \"failures\": {{{}}}}}",
        calls - ok,
        failures.join(", ")
    );
}
