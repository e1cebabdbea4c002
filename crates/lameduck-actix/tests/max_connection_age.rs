//! The maximum connection age (loopback, real time, generous bounds), with an age of 300 ms
//! (each connection's own between 270 and 330 ms):
//!
//! - on `AutoH2cServer`, an idle HTTP/1 keep-alive connection is closed once past its age,
//!   and an h2c one gets the two-step GOAWAY; with a grace, a stream (HTTP/2) or a response
//!   (HTTP/1) that outlasts it is cut and counted;
//! - on actix-web's own `HttpServer`, the first response past the age closes its HTTP/1
//!   connection (`Connection: close`).

use std::time::{Duration, Instant};

use lameduck::connection::CutKind;
use lameduck::Config;
use lameduck_test_support::h2::{answered, frames, get_frame, goaway_ids, read_until, H2_START};
use lameduck_test_support::http1::GET;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::{acknowledge_goaway, start, start_actix_web, stop, Running, WAIT};

const AGE: Duration = Duration::from_millis(300);
const GRACE: Duration = Duration::from_millis(300);

fn aged(grace: Duration) -> Config {
    Config::builder()
        .max_connection_age(AGE)
        .max_connection_age_grace(grace)
        .build()
        .unwrap()
}

/// What the server sends on `conn` within `within` until it closes it.
async fn until_closed(conn: &mut TcpStream, within: Duration) -> String {
    String::from_utf8_lossy(&support::until_closed(conn, within).await).into_owned()
}

#[actix_web::test]
async fn an_idle_http1_connection_is_closed_once_past_its_age() {
    let Running { addr, handle, run } = start(aged(Duration::ZERO));
    let accepted = Instant::now();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(GET).await.unwrap();
    let mut head = [0u8; 1024];
    let n = conn.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        !head.contains("connection: close"),
        "young: kept alive\n{head}"
    );
    // Idle from now on: closed at its age.
    assert_eq!(until_closed(&mut conn, WAIT).await, "");
    let closed = accepted.elapsed();
    assert!(
        closed >= AGE * 8 / 10 && closed <= AGE * 3,
        "closed {closed:?} after accept"
    );
    stop(&handle, run).await;
    assert_eq!(
        handle.shared().counters().peer_counts().connections_cut(),
        0
    );
}

/// An h2c connection whose stream 1 (`path`) was sent at once; when it was opened.
async fn h2c(addr: std::net::SocketAddr, path: &str) -> (TcpStream, Instant) {
    let opened = Instant::now();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(H2_START).await.unwrap();
    conn.write_all(&get_frame(1, path)).await.unwrap();
    (conn, opened)
}

/// Reads up to the GOAWAY's PING and acknowledges it; then up to the final GOAWAY. How long
/// after `opened` the first GOAWAY came.
async fn goodbye(conn: &mut TcpStream, bytes: &mut Vec<u8>, opened: Instant) -> Duration {
    acknowledge_goaway(conn, bytes).await.duration_since(opened)
}

#[actix_web::test]
async fn an_http2_connection_says_goaway_once_past_its_age() {
    let Running { addr, handle, run } = start(aged(Duration::ZERO));
    let (mut conn, opened) = h2c(addr, "/").await;
    let mut bytes = Vec::new();
    assert!(read_until(&mut conn, &mut bytes, WAIT, |f| answered(f, 1)).await);
    let goaway_at = goodbye(&mut conn, &mut bytes, opened).await;
    assert!(
        goaway_at >= AGE * 8 / 10 && goaway_at <= AGE * 3,
        "GOAWAY {goaway_at:?} after the connection opened"
    );
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 1]);
    // A client that closes once its streams are done: nothing is cut.
    drop(conn);
    stop(&handle, run).await;
    assert_eq!(
        handle.shared().counters().peer_counts().connections_cut(),
        0
    );
}

#[actix_web::test]
async fn a_stream_outlasting_the_grace_is_cut_and_counted() {
    let Running { addr, handle, run } = start(aged(GRACE));
    // `/slow` takes 2 s: far past the age and its grace.
    let (mut conn, opened) = h2c(addr, "/slow").await;
    let mut bytes = Vec::new();
    goodbye(&mut conn, &mut bytes, opened).await;
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 1]);
    bytes.extend(support::until_closed(&mut conn, WAIT).await);
    let cut = opened.elapsed();
    assert!(
        cut >= (AGE + GRACE) * 8 / 10 && cut <= (AGE + GRACE) * 2,
        "cut {cut:?} after the connection opened"
    );
    assert!(
        !answered(&frames(&bytes), 1),
        "the stream was cut before its answer"
    );
    let peers = handle.shared().counters().peer_counts();
    assert_eq!(
        peers.cut_since_start[CutKind::MaxConnectionAge.index()],
        1,
        "{peers:?}"
    );
    assert_eq!(
        peers.connections_cut(),
        0,
        "not during a termination: {peers:?}"
    );
    stop(&handle, run).await;
}

#[actix_web::test]
async fn an_http1_response_outlasting_the_grace_is_cut_and_counted() {
    let Running { addr, handle, run } = start(aged(GRACE));
    let opened = Instant::now();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        until_closed(&mut conn, WAIT).await,
        "",
        "cut before its answer"
    );
    let cut = opened.elapsed();
    assert!(
        cut >= (AGE + GRACE) * 8 / 10 && cut <= (AGE + GRACE) * 2,
        "cut {cut:?} after the connection opened"
    );
    let peers = handle.shared().counters().peer_counts();
    assert_eq!(
        peers.cut_since_start[CutKind::MaxConnectionAge.index()],
        1,
        "{peers:?}"
    );
    stop(&handle, run).await;
}

#[actix_web::test]
async fn on_actix_webs_own_server_the_first_response_past_the_age_closes_the_connection() {
    let Running { addr, handle, run } = start_actix_web(aged(Duration::ZERO), false);

    let mut conn = TcpStream::connect(addr).await.unwrap();
    let get = GET;
    conn.write_all(get).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = conn.read(&mut buf).await.unwrap();
    let young = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
    assert!(young.starts_with("http/1.1 200") && !young.contains("connection: close"));
    // actix-web's own server cannot close an idle connection at its age: the next response
    // does.
    tokio::time::sleep(AGE * 12 / 10).await;
    conn.write_all(get).await.unwrap();
    let old = until_closed(&mut conn, WAIT).await.to_ascii_lowercase();
    assert!(old.starts_with("http/1.1 200"), "{old}");
    assert!(old.contains("connection: close"), "{old}");
    stop(&handle, run).await;
}
