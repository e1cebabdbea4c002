//! The load client of the client proofs (`python3 tests/proofs client`): hyper-util's client
//! with lameduck-client's `RetryLayer` (or without it, `--retries 0`: the control), keep-alive
//! requests for a fixed time from several workers; each request carries a unique
//! `x-request-id` (`PREFIX-WORKER-N`) so that a counting server can tell whether any was
//! processed twice. Prints one JSON line with the counts and exits 0.
//!
//! `cargo run --release -p lameduck-client --example client_load -- --target http://127.0.0.1:8080 --protocol h2c --clients 4 --workers 16 --duration 16s --retries 3`
//!
//! - `--protocol http1` (keep-alive, one connection per worker at most) or `h2c` (HTTP/2 with
//!   prior knowledge: `--clients` independent clients, one connection each, shared by the
//!   workers);
//! - `--path P` (default `/`); `--post-every N`: every Nth request of a worker is a `POST`
//!   of a small body, marked `Retryable` (0: none);
//! - `--retries N`: N + 1 attempts per request through the layer (default 3); 0: no layer;
//! - `--max-wait D`: the longest `Retry-After` honoured (default 10s).
//!
//! A request fails when it ends with an error or a status other than 2xx; the JSON line has
//! the requests, the failures by kind (the first of each kind is printed on stderr with its
//! causes), and the layer's retries, exhaustions and skips by reason.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lameduck_client::{RetryLayer, RetryReason, Retryable};
use tower::{Service, ServiceBuilder, ServiceExt};

struct Args {
    target: String,
    h2: bool,
    clients: usize,
    workers: usize,
    duration: Duration,
    path: String,
    post_every: u64,
    retries: u32,
    max_wait: Duration,
    prefix: String,
}

fn duration(text: &str) -> Result<Duration, String> {
    let (n, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |i| text.split_at(i));
    let n: u64 = n.parse().map_err(|_| format!("bad duration {text:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!("bad duration {text:?} (ms or s)")),
    }
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        target: "http://127.0.0.1:8080".into(),
        h2: false,
        clients: 4,
        workers: 16,
        duration: Duration::from_secs(16),
        path: "/".into(),
        post_every: 0,
        retries: 3,
        max_wait: Duration::from_secs(10),
        prefix: format!("p{}", std::process::id()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--target" => a.target = value()?,
            "--protocol" => match value()?.as_str() {
                "http1" => a.h2 = false,
                "h2c" => a.h2 = true,
                other => return Err(format!("--protocol {other}: http1 or h2c")),
            },
            "--clients" => a.clients = number(value()?)?.max(1) as usize,
            "--workers" => a.workers = number(value()?)?.max(1) as usize,
            "--duration" => a.duration = duration(&value()?)?,
            "--path" => a.path = value()?,
            "--post-every" => a.post_every = number(value()?)?,
            "--retries" => {
                a.retries = u32::try_from(number(value()?)?).map_err(|e| e.to_string())?
            }
            "--max-wait" => a.max_wait = duration(&value()?)?,
            "--id-prefix" => a.prefix = value()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

#[derive(Default)]
struct Counts {
    requests: u64,
    ok: u64,
    posts: u64,
    failures: BTreeMap<String, u64>,
}

/// `e` and each error under it, joined by `: `.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

fn json_map<K: std::fmt::Display>(pairs: impl IntoIterator<Item = (K, u64)>) -> String {
    let items: Vec<String> = pairs
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{:?}: {n}", k.to_string().replace('"', "'")))
        .collect();
    format!("{{{}}}", items.join(", "))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let layer = (args.retries > 0).then(|| {
        RetryLayer::builder()
            .max_attempts(args.retries + 1)
            .max_wait(args.max_wait)
            .build()
            .unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(2);
            })
    });
    let stats = layer.as_ref().map(RetryLayer::stats);
    let counts: Arc<Mutex<Counts>> = Arc::default();
    let started = Instant::now();
    let end = started + args.duration;
    let clients = if args.h2 { args.clients } else { 1 };
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = Client::builder(TokioExecutor::new())
            .http2_only(args.h2)
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http::<Full<Bytes>>();
        let service = ServiceBuilder::new()
            .option_layer(layer.clone())
            .service(client);
        for w in (c..args.workers).step_by(clients) {
            let (mut service, counts) = (service.clone(), Arc::clone(&counts));
            let uri: http::Uri = match format!("{}{}", args.target, args.path).parse() {
                Ok(u) => u,
                Err(e) => {
                    eprintln!("error: --target/--path: {e}");
                    std::process::exit(2);
                }
            };
            let (prefix, post_every) = (args.prefix.clone(), args.post_every);
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < end {
                    n += 1;
                    let post = post_every > 0 && n.is_multiple_of(post_every);
                    let mut request = http::Request::builder()
                        .uri(uri.clone())
                        .header("x-request-id", format!("{prefix}-{w}-{n}"));
                    let body = if post {
                        request = request.method(http::Method::POST);
                        Full::new(Bytes::from_static(b"{\"order\":1}"))
                    } else {
                        Full::new(Bytes::new())
                    };
                    let Ok(mut request) = request.body(body) else {
                        continue;
                    };
                    if post {
                        request.extensions_mut().insert(Retryable);
                    }
                    let result = match service.ready().await {
                        Ok(s) => s.call(request).await,
                        Err(e) => Err(e),
                    };
                    let outcome = match result {
                        Ok(r) if r.status().is_success() => match r.into_body().collect().await {
                            Ok(_) => Ok(()),
                            Err(e) => Err((format!("body: {e}"), chain(&e))),
                        },
                        Ok(r) => Err((format!("status {}", r.status().as_u16()), String::new())),
                        Err(e) => {
                            let reason = lameduck_client::classify_error(&e)
                                .map_or("final", RetryReason::as_str);
                            Err((format!("error ({reason}): {e}"), chain(&e)))
                        }
                    };
                    let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
                    c.requests += 1;
                    c.posts += u64::from(post);
                    match outcome {
                        Ok(()) => c.ok += 1,
                        Err((kind, causes)) => {
                            if !c.failures.contains_key(&kind) {
                                eprintln!(
                                    "failed request: {kind}: {causes} (ended {:.3}s after the load started)",
                                    started.elapsed().as_secs_f64()
                                );
                            }
                            *c.failures.entry(kind).or_default() += 1;
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
    let (retries, exhausted, skipped) = match &stats {
        Some(s) => (
            json_map(s.retries_by_reason()),
            json_map(RetryReason::ALL.map(|r| (r, s.exhausted(r)))),
            json_map(s.skipped_by_reason()),
        ),
        None => ("{}".into(), "{}".into(), "{}".into()),
    };
    println!(
        "{{\"requests\": {}, \"ok\": {}, \"failed\": {}, \"posts\": {}, \"failures\": {}, \"retries\": {retries}, \"exhausted\": {exhausted}, \"skipped\": {skipped}, \"layer\": {}}}",
        c.requests,
        c.ok,
        c.requests - c.ok,
        c.posts,
        json_map(c.failures.iter().map(|(k, v)| (k, *v))),
        stats.is_some()
    );
}
