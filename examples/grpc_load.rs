//! gRPC load for the rolling-restart proof (`python3 tests/proofs rolling_restart_grpc`): unary
//! `Sleep` calls of the gRPC example server through tonic's client, for a fixed time, on
//! several HTTP/2 connections with several calls in flight on each; prints one JSON line
//! with the counts (calls, ok, failed, failures by gRPC code) and exits 0.
//!
//! `cargo run --release --example grpc_load -- --target http://127.0.0.1:8080 --connections 8 --concurrency 4 --duration 16s --sleep 20ms`
//!
//! Over TLS: `--target https://127.0.0.1:8443 --tls-ca ca.crt` verifies the server's
//! certificate against the CA in that PEM file (rustls with ring), under the target's host or
//! `--tls-domain NAME`; ALPN offers h2 and a connection that did not negotiate it fails.
//!
//! `--retries N` (default 0: tonic's client as it is, every call that does not end OK is a
//! failure) puts lameduck-client's `RetryLayer` under the client with N + 1 attempts per call
//! (the first and N retries): it retries what the server did not process (hyper cancelled
//! the call before sending it, `unsent`; the server's GOAWAY refused it, `refused`), and an
//! `UNAVAILABLE` with `grpc-retry-pushback-ms` after that many milliseconds (`pushback`: the
//! example's `Demo` service is configured idempotent). The retries are counted by kind in the
//! JSON line (`retries`, from the layer's counts); a call is counted once, with its final
//! outcome.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lameduck_client::RetryLayer;
use lameduck_examples_grpc::grpc::{DemoClient, SleepRequest};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tower::ServiceBuilder;

/// Calls made, calls that ended OK, and the failures by status.
#[derive(Default)]
struct Counts {
    calls: u64,
    ok: u64,
    failures: BTreeMap<String, u64>,
}

/// The longest server pushback honoured; a call asked to wait longer is not retried.
const MAX_PUSHBACK: Duration = Duration::from_secs(10);

/// The layer of `--retries N`: N + 1 attempts, `Demo`'s methods idempotent (its `Sleep` may
/// run twice), pushbacks up to `MAX_PUSHBACK` honoured.
fn retry_layer(retries: u32) -> Option<RetryLayer> {
    if retries == 0 {
        return None;
    }
    let layer = RetryLayer::builder()
        .max_attempts(retries.saturating_add(1))
        .max_wait(MAX_PUSHBACK)
        .idempotent_grpc_service("lameduck.example.Demo")
        .build();
    match layer {
        Ok(layer) => Some(layer),
        Err(e) => {
            eprintln!("error: --retries: {e}");
            std::process::exit(2);
        }
    }
}

/// `status` and each error under it, outermost first, joined by `: `.
fn error_chain(status: &tonic::Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

struct Args {
    target: String,
    connections: usize,
    concurrency: usize,
    duration: Duration,
    sleep: String,
    tls_ca: Option<String>,
    tls_domain: Option<String>,
    retries: u32,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        target: "http://127.0.0.1:8080".into(),
        connections: 8,
        concurrency: 4,
        duration: Duration::from_secs(16),
        sleep: "20ms".into(),
        tls_ca: None,
        tls_domain: None,
        retries: 0,
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
            "--tls-ca" => args.tls_ca = Some(value()?),
            "--tls-domain" => args.tls_domain = Some(value()?),
            "--retries" => {
                args.retries = value()?.parse().map_err(|e| format!("--retries: {e}"))?
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.tls_ca.is_some() != args.target.starts_with("https://") {
        return Err("--tls-ca goes with an https:// --target, and only with one".into());
    }
    if args.tls_domain.is_some() && args.tls_ca.is_none() {
        return Err("--tls-domain needs --tls-ca".into());
    }
    Ok(args)
}

/// The client TLS of `--tls-ca` and `--tls-domain`: only that CA trusted, ALPN h2 required.
fn tls_config(args: &Args) -> Result<Option<ClientTlsConfig>, String> {
    let Some(ca) = &args.tls_ca else {
        return Ok(None);
    };
    let pem = std::fs::read(ca).map_err(|e| format!("--tls-ca {ca}: {e}"))?;
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
    if let Some(domain) = &args.tls_domain {
        tls = tls.domain_name(domain.clone());
    }
    Ok(Some(tls))
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
    let mut endpoint = match Endpoint::from_shared(args.target.clone()) {
        Ok(e) => e.connect_timeout(Duration::from_secs(2)),
        Err(e) => {
            eprintln!("error: --target: {e}");
            std::process::exit(2);
        }
    };
    match tls_config(&args) {
        Ok(None) => {}
        Ok(Some(tls)) => match endpoint.tls_config(tls) {
            Ok(e) => endpoint = e,
            Err(e) => {
                eprintln!("error: TLS: {e}");
                std::process::exit(2);
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
    let counts: Arc<Mutex<Counts>> = Arc::default();
    let layer = retry_layer(args.retries);
    let stats = layer.as_ref().map(RetryLayer::stats);
    let started = Instant::now();
    let end = started + args.duration;
    let mut tasks = Vec::new();
    for _ in 0..args.connections.max(1) {
        // One HTTP/2 connection each; tonic reconnects it if it ever closes.
        let channel = endpoint.connect_lazy();
        let service = ServiceBuilder::new()
            .option_layer(layer.clone())
            .service(channel);
        for _ in 0..args.concurrency.max(1) {
            let mut client = DemoClient::new(service.clone());
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
                    c.calls += 1;
                    match result {
                        Ok(_) => c.ok += 1,
                        Err(status) => {
                            let key = format!("{:?}: {}", status.code(), status.message());
                            if !c.failures.contains_key(&key) {
                                // The first of each kind, with its causes, for the run's log.
                                eprintln!(
                                    "failed call: {} (ended {:.3}s after the load started)",
                                    error_chain(&status),
                                    started.elapsed().as_secs_f64()
                                );
                            }
                            *c.failures.entry(key).or_default() += 1;
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let c = &*counts.lock().unwrap_or_else(|p| p.into_inner());
    let failures: Vec<String> = c
        .failures
        .iter()
        .map(|(k, v)| format!("{:?}: {v}", k.replace('"', "'")))
        .collect();
    let retries: Vec<String> = stats
        .map(|s| s.retries_by_reason())
        .unwrap_or_default()
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(reason, n)| format!("{:?}: {n}", reason.as_str()))
        .collect();
    println!(
        "{{\"calls\": {}, \"ok\": {}, \"failed\": {}, \"failures\": {{{}}}, \"retries\": {{{}}}}}",
        c.calls,
        c.ok,
        c.calls - c.ok,
        failures.join(", "),
        retries.join(", ")
    );
}
