//! Connections with a handshake before HTTP (TLS), under tokio's paused clock, with a
//! handshake that stands in for TLS: it reads one byte that says which protocol ALPN chose.
//! A silent client delays no other, a handshake is cut at its timeout, and a handshake still
//! running when the server stops accepting gets one second more: one that completes by then
//! has its connection told to go away (HTTP/2 GOAWAY), while the termination waits for it;
//! one that does not is cut then, and counted, however long its timeout.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use lameduck::Config;
use lameduck_hyper::{Alpn, Handshake};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

mod support;
use support::{Connections, Run};

use lameduck_test_support::conn::read_to_close;
use lameduck_test_support::h2::{frames, GOAWAY, H2_START};

/// The bound of the stand-in handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a test waits for the server to close a connection (virtual time).
const WITHIN: Duration = Duration::from_secs(120);

/// The stand-in for TLS: the client's first byte is its "ClientHello" and names the protocol
/// (`1`: HTTP/1.1, `2`: HTTP/2); anything else fails the handshake.
#[derive(Clone, Default)]
struct ByteHandshake {
    timed_out: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
}

impl Handshake<TokioIo<DuplexStream>> for ByteHandshake {
    type Io = TokioIo<DuplexStream>;

    fn timeout(&self) -> Duration {
        HANDSHAKE_TIMEOUT
    }

    async fn handshake(
        &self,
        io: TokioIo<DuplexStream>,
        _peer: SocketAddr,
    ) -> Option<(Self::Io, Option<Alpn>)> {
        let mut io = io.into_inner();
        let alpn = match io.read_u8().await {
            Ok(b'1') => Alpn::Http1,
            Ok(b'2') => Alpn::Http2,
            _ => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        Some((TokioIo::new(io), Some(alpn)))
    }

    fn timed_out(&self, _peer: SocketAddr) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
    }
}

/// A server (no signal handlers) serving `n` in-memory connections through the stand-in
/// handshake: the clients' ends, the handshake's counters, the handle and the running server.
fn serve(
    n: usize,
) -> (
    Vec<DuplexStream>,
    ByteHandshake,
    lameduck_hyper::Handle,
    Run,
) {
    let (clients, servers): (Vec<_>, Vec<_>) = (0..n).map(|_| tokio::io::duplex(4096)).unzip();
    let mut server = support::prepare(Config::default());
    let handshake = ByteHandshake::default();
    server
        .serve_tls(
            "api",
            Connections(servers),
            handshake.clone(),
            support::service("ok"),
        )
        .unwrap();
    let handle = server.handle();
    (clients, handshake, handle, tokio::spawn(server.run()))
}

/// The HTTP/2 frame types in `bytes`, in order.
fn frame_types(bytes: &[u8]) -> Vec<u8> {
    frames(bytes).iter().map(|f| f.kind).collect()
}

#[tokio::test(start_paused = true)]
async fn a_silent_handshake_delays_no_other_connection() {
    let (mut clients, _, handle, run) = serve(2);
    let mut second = clients.pop().unwrap();
    let _silent = clients.pop().unwrap();
    let started = tokio::time::Instant::now();
    second
        .write_all(b"1GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(1), second.read(&mut buf))
        .await
        .expect("the second connection waited for the first one's handshake")
        .unwrap();
    let reply = String::from_utf8_lossy(&buf[..n]);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("ok"), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(1));
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_handshake_is_cut_at_its_timeout_and_reported() {
    let (mut clients, handshake, handle, run) = serve(1);
    let waited = read_to_close(&mut clients[0], WITHIN)
        .await
        .expect("the silent connection stayed open")
        .after;
    assert!(
        waited >= HANDSHAKE_TIMEOUT && waited <= HANDSHAKE_TIMEOUT + Duration::from_secs(1),
        "closed {waited:?} after accept"
    );
    assert_eq!(handshake.timed_out.load(Ordering::Relaxed), 1);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_handshake_is_reported_and_closed() {
    let (mut clients, handshake, handle, run) = serve(1);
    clients[0].write_all(b"x").await.unwrap();
    let bytes = read_to_close(&mut clients[0], WITHIN)
        .await
        .expect("closed")
        .bytes;
    assert!(bytes.is_empty());
    assert_eq!(handshake.failed.load(Ordering::Relaxed), 1);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_handshake_running_at_shutdown_completes_and_its_http2_connection_gets_goaway() {
    let (mut clients, _, handle, run) = serve(1);
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.request_shutdown();
    // The server stops accepting; the handshake in progress is waited for.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !run.is_finished(),
        "the termination did not wait for the handshake"
    );
    let mut start = b"2".to_vec();
    start.extend_from_slice(H2_START);
    clients[0].write_all(&start).await.unwrap();
    // The server's SETTINGS, then its GOAWAY (and a PING this client never answers).
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 1024];
    while !frame_types(&bytes).contains(&GOAWAY) {
        let n = tokio::time::timeout(Duration::from_secs(2), clients[0].read(&mut buf))
            .await
            .expect("no GOAWAY")
            .unwrap();
        assert!(
            n > 0,
            "closed without GOAWAY: frames {:?}",
            frame_types(&bytes)
        );
        bytes.extend_from_slice(&buf[..n]);
    }
    drop(clients);
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_handshake_running_at_shutdown_that_never_completes_is_cut_a_second_later() {
    let (mut clients, handshake, handle, run) = serve(1);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let shared = handle.shared().clone();
    handle.request_shutdown();
    let waited = read_to_close(&mut clients[0], WITHIN)
        .await
        .expect("closed")
        .after;
    // Not the handshake timeout (5 s): the stop's bound.
    let bound = lameduck::connection::SILENT_PEER_TIMEOUT;
    assert!(
        waited >= bound && waited <= bound + Duration::from_millis(100),
        "closed after {waited:?}"
    );
    assert_eq!(handshake.timed_out.load(Ordering::Relaxed), 0);
    assert_eq!(run.await.unwrap().unwrap(), 0);
    let peers = shared.counters().peer_counts();
    let kind = lameduck::connection::CutKind::TlsHandshake;
    assert_eq!(
        (peers.connections_cut(), peers.cut_in_termination(kind)),
        (1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn an_http1_request_sent_with_the_handshake_at_shutdown_is_answered_then_closed() {
    let (mut clients, _, handle, run) = serve(1);
    tokio::time::sleep(Duration::from_millis(10)).await;
    handle.request_shutdown();
    tokio::time::sleep(Duration::from_millis(10)).await;
    clients[0]
        .write_all(b"1GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let bytes = read_to_close(&mut clients[0], WITHIN)
        .await
        .expect("closed")
        .bytes;
    // Answered (503 once the gate has closed), then closed; not cut before the answer.
    let reply = String::from_utf8_lossy(&bytes).to_lowercase();
    assert!(reply.starts_with("http/1.1 503"), "{reply}");
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
