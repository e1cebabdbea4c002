//! What the tests over real loopback connections share: servers without OS signal handlers,
//! answering `GET /` with `ok` (`AutoH2cServer`, also `GET /slow` with `slow` after [`SLOW`];
//! or actix-web's own `HttpServer`), the wait for a server's exit, the wait for a
//! connection's close, and the GOAWAY's acknowledgement. The raw HTTP/1 and HTTP/2
//! clients are `lameduck_test_support`'s.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpServer};
use lameduck::Config;
use lameduck_actix::{ActixServer, AutoH2cServer, Handle, Server, TokioRuntime};
use lameduck_test_support::conn::read_to_close;
use lameduck_test_support::h2::ping_ack;
use lameduck_test_support::h2::{frames, read_until, Frame, GOAWAY, PING};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The bound of every wait for the server.
pub const WAIT: Duration = Duration::from_secs(10);

/// How long `/slow` takes to answer.
pub const SLOW: Duration = Duration::from_secs(2);

/// A prepared server for `config` that installs no OS signal handlers: several servers run
/// in one test process, and the tests stop them through their [`Handle`].
pub fn prepare(config: Config) -> Server<TokioRuntime> {
    let mut builder = lameduck_actix::builder(config);
    builder.without_os_signals();
    builder.prepare()
}

/// Serves `http` as "api" on a new loopback listener, bound by `listen` (which also sets the
/// workers); the listener's address.
pub fn serve_on_loopback<H: ActixServer>(
    server: &mut Server<TokioRuntime>,
    http: H,
    listen: impl FnOnce(H, TcpListener) -> std::io::Result<H>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    lameduck_actix::serve(server, "api", http, |http| listen(http, listener)).unwrap();
    addr
}

/// A running lifecycle on one loopback listener, and its `run` task's exit code.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: Handle,
    pub run: JoinHandle<u8>,
}

/// Spawns `server`'s run; `addr` is where it listens.
pub fn spawn_run(addr: SocketAddr, server: Server<TokioRuntime>) -> Running {
    let handle = server.handle();
    let run = actix_rt::spawn(async move { server.run().await.unwrap() });
    Running { addr, handle, run }
}

/// A prepared server for `config` whose app answers `GET /` with `ok` and `GET /slow` with
/// `slow` after [`SLOW`] through the admission middleware, on an `AutoH2cServer` bound to a
/// loopback port with `workers` workers.
pub fn prepare_ok_server(config: Config, workers: usize) -> (SocketAddr, Server<TokioRuntime>) {
    let mut server = prepare(config);
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    let http = AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(|| async { "ok" }))
            .route(
                "/slow",
                web::get().to(|| async {
                    tokio::time::sleep(SLOW).await;
                    "slow"
                }),
            )
    });
    let addr = serve_on_loopback(&mut server, http, |http, listener| {
        http.workers(workers).listen(listener)
    });
    (addr, server)
}

/// Starts [`prepare_ok_server`]'s server for `config` with one worker.
pub fn start(config: Config) -> Running {
    let (addr, server) = prepare_ok_server(config, 1);
    spawn_run(addr, server)
}

/// Starts actix-web's own `HttpServer` for `config` with one worker, its app answering
/// `GET /` with `ok` through the admission middleware; with `h2c`, HTTP/2 with prior knowledge
/// too.
pub fn start_actix_web(config: Config, h2c: bool) -> Running {
    let mut server = prepare(config);
    let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
    let http = HttpServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(|| async { "ok" }))
    });
    let addr = serve_on_loopback(&mut server, http, |http, listener| {
        let http = http.workers(1);
        if h2c {
            http.listen_auto_h2c(listener)
        } else {
            http.listen(listener)
        }
    });
    spawn_run(addr, server)
}

/// The exit code of the server whose `run` is `run`; panics unless it exits within `within`.
pub async fn exit_code(run: JoinHandle<u8>, within: Duration) -> u8 {
    tokio::time::timeout(within, run)
        .await
        .expect("the server exits")
        .unwrap()
}

/// Asks the server to stop, and asserts it exits 0 within [`WAIT`].
pub async fn stop(handle: &Handle, run: JoinHandle<u8>) {
    assert!(handle.request_shutdown());
    let code = exit_code(run, WAIT).await;
    assert_eq!(code, 0);
}

/// What the server sends on `conn` until it closes it; panics unless it closes it within
/// `within`.
pub async fn until_closed(conn: &mut TcpStream, within: Duration) -> Vec<u8> {
    read_to_close(conn, within)
        .await
        .expect("the server closed the connection in time")
        .bytes
}

/// Whether `frames` hold the PING the server sends with its first GOAWAY (no
/// acknowledgement).
pub fn goaway_ping(frames: &[Frame]) -> bool {
    frames.iter().any(|f| f.kind == PING && f.flags & 1 == 0)
}

/// Reads up to the GOAWAY's PING and acknowledges it; then up to the final GOAWAY. When the
/// PING was read.
pub async fn acknowledge_goaway(conn: &mut TcpStream, bytes: &mut Vec<u8>) -> Instant {
    assert!(read_until(conn, bytes, WAIT, goaway_ping).await);
    let at = Instant::now();
    let payload = frames(bytes)
        .into_iter()
        .find(|f| f.kind == PING && f.flags & 1 == 0)
        .unwrap()
        .payload;
    conn.write_all(&ping_ack(&payload)).await.unwrap();
    let last = |f: &[Frame]| f.iter().filter(|f| f.kind == GOAWAY).count() >= 2;
    assert!(read_until(conn, bytes, WAIT, last).await);
    at
}
