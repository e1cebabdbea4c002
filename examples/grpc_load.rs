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
//! `--retries N` (default 0: every call that does not end OK is a failure) retries a call, at
//! most N times, in the cases a gRPC client with a retry policy retries: the server did not
//! process the call (hyper cancelled it before sending, or the server's GOAWAY refused it:
//! grpc-go retries these transparently), at once; or the server answered `UNAVAILABLE` with
//! `grpc-retry-pushback-ms`, after that many milliseconds. The retries are counted by kind
//! in the JSON line (`retries`); a call is counted once, with its final outcome.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lameduck_examples_grpc::grpc::{DemoClient, SleepRequest};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

/// Calls made, calls that ended OK, the failures by status, and the retries by kind.
#[derive(Default)]
struct Counts {
    calls: u64,
    ok: u64,
    failures: BTreeMap<String, u64>,
    retries: BTreeMap<&'static str, u64>,
}

/// The longest server pushback honoured; a longer one is waited for this long.
const MAX_PUSHBACK: Duration = Duration::from_secs(10);

/// Whether `status`, a failed call, is one that `--retries` retries, and after how long:
/// - `unsent`: hyper cancelled the call before sending it (the connection was closing);
/// - `refused`: the server's GOAWAY says it did not process the call. h2 fails a call with
///   the GOAWAY it received (remote, `NO_ERROR`) in exactly two cases: its stream is above the
///   GOAWAY's last-stream-id, or the call was about to open a stream on a connection that had
///   just received the GOAWAY. (A call cut by the connection's end fails with a broken pipe or
///   a reset instead.) grpc-go and grpc-core retry both kinds on their own.
/// - `pushback`: the server answered `UNAVAILABLE` with `grpc-retry-pushback-ms`, after that
///   many milliseconds.
fn retry_after(status: &tonic::Status) -> Option<(&'static str, Duration)> {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return Some(("unsent", Duration::ZERO));
        }
        if e.downcast_ref::<h2::Error>().is_some_and(|e| {
            e.is_go_away() && e.is_remote() && e.reason() == Some(h2::Reason::NO_ERROR)
        }) {
            return Some(("refused", Duration::ZERO));
        }
        source = e.source();
    }
    if status.code() != tonic::Code::Unavailable {
        return None;
    }
    let ms = status
        .metadata()
        .get("grpc-retry-pushback-ms")?
        .to_str()
        .ok()?
        .parse::<u64>()
        .ok()?;
    Some(("pushback", Duration::from_millis(ms).min(MAX_PUSHBACK)))
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
    let started = Instant::now();
    let end = started + args.duration;
    let mut tasks = Vec::new();
    for _ in 0..args.connections.max(1) {
        // One HTTP/2 connection each; tonic reconnects it if it ever closes.
        let channel = endpoint.connect_lazy();
        for _ in 0..args.concurrency.max(1) {
            let mut client = DemoClient::new(channel.clone());
            let counts = Arc::clone(&counts);
            let sleep = args.sleep.clone();
            let retries = args.retries;
            tasks.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let mut attempt = 0;
                    let result = loop {
                        let mut request = tonic::Request::new(SleepRequest {
                            duration: sleep.clone(),
                        });
                        request.set_timeout(Duration::from_secs(5));
                        let result = client.sleep(request).await;
                        let retry = match &result {
                            Err(status) if attempt < retries => retry_after(status),
                            _ => None,
                        };
                        let Some((kind, wait)) = retry else {
                            break result;
                        };
                        attempt += 1;
                        *counts
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .retries
                            .entry(kind)
                            .or_default() += 1;
                        tokio::time::sleep(wait).await;
                    };
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
    let retries: Vec<String> = c
        .retries
        .iter()
        .map(|(k, v)| format!("{k:?}: {v}"))
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
