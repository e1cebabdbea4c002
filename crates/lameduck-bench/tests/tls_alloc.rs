//! Heap allocations per keep-alive `GET /` over TLS (HTTP/1.1, ALPN `http/1.1`): the TLS
//! counterpart of the root package's `tests/http_alloc.rs`.
//!
//! A counting global allocator counts every allocation of this process. Each server runs
//! in-process on a current-thread tokio runtime of its own thread, serving the example
//! servers' routes (`lameduck_examples::routes`) with the rustls configuration of
//! `lameduck_tls::ServerTls`; the client is a blocking rustls connection in the test's thread
//! (its own allocations per request are the same against every server, so they cancel in the
//! differences). After a warm-up, the allocations of a fixed number of requests are counted
//! for:
//!
//! * `bare`: tokio-rustls and hyper-util's auto connection (as `bare_hyper_tls`);
//! * `bare_alpn`: tokio-rustls and hyper's own HTTP/1 connection, chosen from ALPN as
//!   lameduck's `serve_tls` does (`bare_hyper_tls --alpn`);
//! * `lameduck`: `Server::serve_tls` with `lameduck_tokio::TlsAcceptor`.
//!
//! Asserted: lameduck adds no allocation per request to the same hyper connection
//! (`lameduck - bare_alpn`), nor to hyper-util's auto connection (`lameduck - bare`).
//!
//! What this does not catch: under the many-connection load of `scripts/bench_http.py`
//! (16 connections, the multi-threaded example server under callgrind), hyper's HTTP/1
//! connection served directly over TLS (lameduck, and `bare_hyper_tls --alpn`) was seen to
//! reallocate its read buffer on every request (two allocations) where hyper-util's auto
//! connection did not; one connection driven request by request here never gets into that
//! state (BENCHMARKS.md, "Per-request cost over TLS").

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use lameduck_bench::tls::{self, ALPN_HTTP1};
use lameduck_examples::routes;
use lameduck_test_support::alloc::{allocations, in_thread, keep_alive_gets, Counting};
use lameduck_tls::rustls::pki_types::ServerName;
use lameduck_tls::rustls::{ClientConfig, ClientConnection, StreamOwned};
use lameduck_tls::ServerTls;
use lameduck_tokio::TokioRuntime;

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: usize = 500;
const REQUESTS: usize = 4_000;

/// The certificate and key (written once per test process) and the client configuration.
struct Pki {
    cert: PathBuf,
    key: PathBuf,
    client: Arc<ClientConfig>,
}

fn pki() -> &'static Pki {
    static PKI: std::sync::OnceLock<Pki> = std::sync::OnceLock::new();
    PKI.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lameduck-tls-alloc.{}", std::process::id()));
        let (cert, key) = tls::write_certificate(&dir).expect("certificate");
        let client = tls::client_config(&cert, ALPN_HTTP1, false).expect("client configuration");
        Pki { cert, key, client }
    })
}

/// Allocations per request (of `REQUESTS`, after the warm-up) of the TLS server at `addr`.
fn allocations_per_request(addr: SocketAddr) -> f64 {
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = ClientConnection::new(Arc::clone(&pki().client), name).expect("client");
    let mut stream = StreamOwned::new(conn, tcp);
    let mut buf = vec![0u8; 4096];
    keep_alive_gets(&mut stream, WARM_UP, &mut buf);
    assert_eq!(stream.conn.alpn_protocol(), Some(ALPN_HTTP1));
    let before = allocations();
    keep_alive_gets(&mut stream, REQUESTS, &mut buf);
    let after = allocations();
    (after - before) as f64 / REQUESTS as f64
}

/// The servers' TLS; its files are not read again during a test (a reload check allocates).
fn server_tls() -> ServerTls {
    ServerTls::builder(&pki().cert, &pki().key)
        .reload_interval(Duration::from_secs(3600))
        .build()
        .expect("server TLS")
}

/// The tests count every allocation of the process: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A bare TLS server of one connection: hyper-util's auto connection, or with `alpn` hyper's
/// HTTP/1 connection.
fn bare(alpn: bool) -> f64 {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, thread) = in_thread(move |tx| async move {
        let tls = server_tls();
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.rustls_config());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        tx.send(listener.local_addr().unwrap()).unwrap();
        let service = TowerToHyperService::new(routes::service(TokioRuntime));
        let (stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        let stream = TokioIo::new(acceptor.accept(stream).await.unwrap());
        if alpn {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(stream, service)
                .with_upgrades();
            tokio::select! {
                _ = conn => {}
                _ = stop_rx => {}
            }
        } else {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(stream, service);
            tokio::select! {
                _ = conn => {}
                _ = stop_rx => {}
            }
        }
    });
    let per_request = allocations_per_request(addr);
    let _ = stop_tx.send(());
    thread.join().expect("bare server");
    per_request
}

fn with_lameduck() -> f64 {
    let (handle_tx, handle_rx) = mpsc::channel();
    let (addr, thread) = in_thread(|tx| async move {
        let tls = server_tls();
        let mut builder = lameduck_tokio::builder(lameduck::Config::default());
        builder.without_os_signals();
        let mut server = builder.prepare();
        let listener = lameduck_tokio::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server
            .serve_tls(
                "api",
                listener,
                lameduck_tokio::TlsAcceptor::new(&tls),
                routes::service(TokioRuntime),
            )
            .unwrap();
        handle_tx.send(server.handle()).unwrap();
        tx.send(addr).unwrap();
        assert_eq!(server.run().await.unwrap(), 0);
    });
    let handle = handle_rx.recv().expect("handle");
    let per_request = allocations_per_request(addr);
    handle.request_shutdown();
    thread.join().expect("lameduck server");
    per_request
}

#[test]
fn lameduck_adds_no_allocation_to_the_same_hyper_connection() {
    let _serial = serial();
    let bare_alpn = bare(true);
    let lameduck = with_lameduck();
    eprintln!(
        "heap allocations per keep-alive GET / over TLS: bare with hyper's HTTP/1 connection \
         {bare_alpn:.3}, with lameduck {lameduck:.3}"
    );
    // The control: the counter sees the allocations of a served request.
    assert!(
        bare_alpn > 0.5,
        "the counter saw {bare_alpn} allocations per request"
    );
    assert!(
        lameduck - bare_alpn < 0.01,
        "lameduck adds {:.3} heap allocations per request over TLS (bare {bare_alpn:.3}, with \
         lameduck {lameduck:.3})",
        lameduck - bare_alpn
    );
}

#[test]
fn lameduck_adds_no_allocation_to_hyper_util_auto() {
    let _serial = serial();
    let bare = bare(false);
    let lameduck = with_lameduck();
    eprintln!(
        "heap allocations per keep-alive GET / over TLS: bare (hyper-util auto) {bare:.3}, \
         with lameduck {lameduck:.3}"
    );
    assert!(bare > 0.5, "the counter saw {bare} allocations per request");
    assert!(
        lameduck - bare < 0.01,
        "lameduck adds {:.3} heap allocations per request over TLS (bare {bare:.3}, with \
         lameduck {lameduck:.3})",
        lameduck - bare
    );
}
