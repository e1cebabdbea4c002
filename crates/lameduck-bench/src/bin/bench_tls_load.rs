//! A fixed-count load over TLS, for the per-request cost over TLS (`scripts/bench_http.py`,
//! pairs `hyper-tls-*`): exactly `--requests N` GETs of `--path` (default `/`) to `--addr`,
//! trusting the certificate in `--ca FILE`, over `--connections C` concurrent clients, each
//! sending a request, reading the whole response, and repeating. `--mode`:
//!
//! * `h1`: keep-alive HTTP/1.1 connections (ALPN `http/1.1`), the bench's raw HTTP/1 client
//!   over tokio-rustls;
//! * `h2`: one HTTP/2 connection per client (ALPN `h2`), hyper's HTTP/2 client, one stream at
//!   a time;
//! * `conn`: a new connection per request: the handshake (ALPN `http/1.1`), one
//!   `GET` with `Connection: close`, and the server's close awaited before the next.
//!
//! Every handshake is a full one unless `--resume` (TLS session resumption) is given.
//! With `--ready`, the keep-alive modes first open their connections (handshakes done), then
//! print `ready` and wait for a line on stdin before sending: the caller zeroes the server's
//! counters in between, so that keep-alive requests are measured without the handshakes.
//! Prints `requests=N ok=N errors=N seconds=S rps=R`; exits 1 on any error.
//!
//! `bench_tls_load --write-cert DIR` instead writes a throwaway self-signed certificate for
//! `127.0.0.1` to `DIR/cert.pem` and its key to `DIR/key.pem`, and prints both paths.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lameduck_bench::args::{fail, Args};
use lameduck_bench::http1::{self, Conn};
use lameduck_bench::tls::{self, ALPN_H2, ALPN_HTTP1};
use tokio::sync::Barrier;
use tokio_rustls::TlsConnector;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Http1,
    Http2,
    NewConnection,
}

struct Plan {
    addr: SocketAddr,
    path: String,
    total: u64,
    mode: Mode,
    connector: TlsConnector,
    next: AtomicU64,
    ok: AtomicU64,
    errors: AtomicU64,
    /// `--ready`: every client once connected and `main`, then the same once `main` was
    /// told to go.
    go: Option<(Barrier, Barrier)>,
}

impl Plan {
    /// Takes the next request of the run; `false` once all were taken.
    fn take(&self) -> bool {
        self.next.fetch_add(1, Ordering::Relaxed) < self.total
    }

    /// Waits, once connected, until every client is and the caller said go (`--ready`).
    async fn connected(&self) {
        if let Some((connected, go)) = &self.go {
            connected.wait().await;
            go.wait().await;
        }
    }

    fn count(&self, result: io::Result<bool>) {
        match result {
            Ok(true) => self.ok.fetch_add(1, Ordering::Relaxed),
            _ => self.errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}

fn main() {
    let args = Args::from_env(&["--resume", "--ready"]);
    if let Some(dir) = args.value("--write-cert") {
        match tls::write_certificate(Path::new(dir)) {
            Ok((cert, key)) => println!("{} {}", cert.display(), key.display()),
            Err(e) => fail(&format!("writing the certificate to {dir}: {e}")),
        }
        return;
    }
    let addr: SocketAddr = args
        .value("--addr")
        .unwrap_or_else(|| fail("--addr HOST:PORT is required"))
        .parse()
        .unwrap_or_else(|_| fail("invalid --addr"));
    let ca = args
        .value("--ca")
        .unwrap_or_else(|| fail("--ca FILE (the server's certificate, PEM) is required"));
    let mode = match args.value("--mode").unwrap_or("h1") {
        "h1" => Mode::Http1,
        "h2" => Mode::Http2,
        "conn" => Mode::NewConnection,
        other => fail(&format!("--mode {other:?}: expected h1, h2 or conn")),
    };
    let alpn = if mode == Mode::Http2 {
        ALPN_H2
    } else {
        ALPN_HTTP1
    };
    let config = tls::client_config(Path::new(ca), alpn, args.flag("--resume"))
        .unwrap_or_else(|e| fail(&e.to_string()));
    let total: u64 = args.get("--requests", 10_000);
    let connections: usize = args.get::<usize>("--connections", 16).max(1);
    let ready = args.flag("--ready");
    let plan = Arc::new(Plan {
        addr,
        path: args.value("--path").unwrap_or("/").to_string(),
        total,
        mode,
        connector: TlsConnector::from(config),
        next: AtomicU64::new(0),
        ok: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        go: ready.then(|| (Barrier::new(connections + 1), Barrier::new(connections + 1))),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let start = runtime.block_on(async {
        let tasks: Vec<_> = (0..connections)
            .map(|_| tokio::spawn(client(Arc::clone(&plan))))
            .collect();
        if let Some(go) = &plan.go {
            // Every client has its connection; the caller zeroes the server's counters and
            // says go.
            go_when_told(go).await;
        }
        let start = Instant::now();
        for t in tasks {
            let _ = t.await;
        }
        start
    });
    let secs = start.elapsed().as_secs_f64();
    let (ok, errors) = (
        plan.ok.load(Ordering::Relaxed),
        plan.errors.load(Ordering::Relaxed),
    );
    println!(
        "requests={total} ok={ok} errors={errors} seconds={secs:.3} rps={:.0}",
        ok as f64 / secs
    );
    if errors > 0 || ok != total {
        std::process::exit(1);
    }
}

/// Once every client is connected, prints `ready`, waits for a line on stdin, and lets the
/// clients go.
async fn go_when_told((connected, go): &(Barrier, Barrier)) {
    connected.wait().await;
    println!("ready");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let _ = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    })
    .await;
    go.wait().await;
}

/// One client: takes requests from the plan until none is left.
async fn client(plan: Arc<Plan>) {
    match plan.mode {
        Mode::Http1 => http1_client(&plan).await,
        Mode::Http2 => http2_client(&plan).await,
        Mode::NewConnection => {
            plan.connected().await;
            let request = format!(
                "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                plan.path
            );
            while plan.take() {
                let result = async {
                    let stream = tls::connect(&plan.connector, plan.addr, ALPN_HTTP1).await?;
                    let mut conn = Conn::new(stream);
                    conn.send(request.as_bytes()).await?;
                    let (head, _) = conn.read_response().await?;
                    // The server's close (close_notify, FIN) before the next connection, so
                    // that the server's work for this one falls inside the measurement.
                    conn.wait_close().await?;
                    Ok(head.status == 200)
                }
                .await;
                plan.count(result);
            }
        }
    }
}

async fn http1_client(plan: &Plan) {
    let request = http1::get(&plan.path);
    // Connected before the first request (a failure is retried at the first request).
    let mut conn = tls::connect(&plan.connector, plan.addr, ALPN_HTTP1)
        .await
        .ok()
        .map(Conn::new);
    plan.connected().await;
    while plan.take() {
        let result = async {
            if conn.is_none() {
                let stream = tls::connect(&plan.connector, plan.addr, ALPN_HTTP1).await?;
                conn = Some(Conn::new(stream));
            }
            let c = conn.as_mut().expect("connected");
            c.send(&request).await?;
            let (head, _) = c.read_response().await?;
            if head.close {
                conn = None;
            }
            Ok(head.status == 200)
        }
        .await;
        if result.is_err() {
            conn = None;
        }
        plan.count(result);
    }
}

async fn http2_client(plan: &Plan) {
    let uri: http::Uri = format!("https://{}{}", plan.addr, plan.path)
        .parse()
        .unwrap_or_else(|_| fail("invalid --path"));
    // Connected before the first request (a failure is retried at the first request).
    let mut sender = http2_connect(plan).await.ok();
    plan.connected().await;
    while plan.take() {
        let result = async {
            if sender.as_ref().map_or(true, |s| s.is_closed()) {
                sender = Some(http2_connect(plan).await?);
            }
            let s = sender.as_mut().expect("connected");
            s.ready().await.map_err(io::Error::other)?;
            let request = http::Request::get(uri.clone())
                .body(Empty::<Bytes>::new())
                .map_err(io::Error::other)?;
            let response = s.send_request(request).await.map_err(io::Error::other)?;
            let status = response.status();
            response
                .into_body()
                .collect()
                .await
                .map_err(io::Error::other)?;
            Ok(status == http::StatusCode::OK)
        }
        .await;
        if result.is_err() {
            sender = None;
        }
        plan.count(result);
    }
}

/// A TLS connection with ALPN `h2` and hyper's HTTP/2 client on it (its connection task
/// spawned).
async fn http2_connect(
    plan: &Plan,
) -> io::Result<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> {
    let stream = tls::connect(&plan.connector, plan.addr, ALPN_H2).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}
