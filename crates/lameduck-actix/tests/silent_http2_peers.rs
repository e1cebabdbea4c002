//! Peers cannot hold a termination, on `AutoH2cServer`'s HTTP/2 connections (raw frames over
//! loopback sockets, real time, generous bounds):
//!
//! - a client that had a request answered and then never reads nor answers again is closed
//!   about a second after the stop (not at actix's shutdown timeout), and counted;
//! - a client that reads but never acknowledges the GOAWAY's PING gets the final GOAWAY about
//!   a second after the first, naming the streams it opened, and its stream in flight
//!   completes; then, silent, it is closed a second after its last stream ended.

use std::time::{Duration, Instant};

use lameduck::connection::CutKind;
use lameduck::Config;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use lameduck_test_support::h2::{
    answered, frames, get_frame, goaway_ids, read_until, Frame, GOAWAY, H2_START,
};

mod support;
use support::{
    acknowledge_goaway, exit_code, goaway_ping, start, until_closed, Running, SLOW, WAIT,
};

/// An h2c connection whose stream 1 was answered `ok`; the bytes read so far.
async fn answered_once(running: &Running) -> (TcpStream, Vec<u8>) {
    let mut conn = TcpStream::connect(running.addr).await.unwrap();
    conn.write_all(H2_START).await.unwrap();
    conn.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    assert!(read_until(&mut conn, &mut bytes, WAIT, |f| answered(f, 1)).await);
    (conn, bytes)
}

/// Waits for the run's exit (code 0); how long after `since` it came.
async fn exit_after(running: Running, since: Instant) -> Duration {
    let code = exit_code(running.run, WAIT).await;
    assert_eq!(code, 0);
    since.elapsed()
}

#[actix_web::test]
async fn a_client_that_never_reads_again_is_closed_a_second_after_the_stop_and_counted() {
    let running = start(Config::default());
    let shared = running.handle.shared().clone();
    let (conn, _) = answered_once(&running).await;

    // From now on the client reads nothing and answers nothing (not the GOAWAY's PING).
    let stop = Instant::now();
    assert!(running.handle.request_shutdown());
    let took = exit_after(running, stop).await;
    assert!(
        took >= Duration::from_millis(800) && took <= Duration::from_millis(2500),
        "exited {took:?} after the stop"
    );
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.connections_cut(), 1, "{peers:?}");
    assert_eq!(
        peers.cut_in_termination(CutKind::Http2Goaway),
        1,
        "{peers:?}"
    );
    assert!(peers.last_connection_closed.is_some(), "{peers:?}");
    drop(conn);
}

#[actix_web::test]
async fn without_an_acknowledgement_the_final_goaway_comes_a_second_after_the_first() {
    let running = start(Config::default());
    let shared = running.handle.shared().clone();
    let (mut conn, mut bytes) = answered_once(&running).await;
    // Stream 3 is in flight (its handler takes 2 s) when the server stops.
    conn.write_all(&get_frame(3, "/slow")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stop = Instant::now();
    assert!(running.handle.request_shutdown());

    // The client reads on, but never acknowledges the PING.
    assert!(read_until(&mut conn, &mut bytes, WAIT, goaway_ping).await);
    let first_at = Instant::now();
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff]);
    let last = |f: &[Frame]| f.iter().filter(|f| f.kind == GOAWAY).count() >= 2;
    assert!(read_until(&mut conn, &mut bytes, WAIT, last).await);
    let gap = first_at.elapsed();
    assert!(
        gap >= Duration::from_millis(800) && gap <= Duration::from_millis(1600),
        "final GOAWAY {gap:?} after the first"
    );
    // It names the streams opened so far: stream 3 is served.
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 3]);
    assert!(read_until(&mut conn, &mut bytes, WAIT, |f| answered(f, 3)).await);
    let answered_at = stop.elapsed();
    assert!(
        answered_at >= SLOW - Duration::from_millis(200),
        "{answered_at:?}"
    );

    // Its streams done, the client stays silent: the server closes the connection a second
    // later, and the lifecycle exits.
    until_closed(&mut conn, WAIT).await;
    let closed_at = stop.elapsed();
    assert!(
        closed_at >= answered_at + Duration::from_millis(800)
            && closed_at <= answered_at + Duration::from_millis(1600),
        "closed {closed_at:?} after the stop, answered {answered_at:?} after it"
    );
    exit_after(running, stop).await;
    let peers = shared.counters().peer_counts();
    assert_eq!(
        peers.cut_in_termination(CutKind::Http2Goaway),
        1,
        "{peers:?}"
    );
    assert_eq!(peers.connections_cut(), 1, "{peers:?}");
}

#[actix_web::test]
async fn a_client_that_acknowledges_and_closes_is_not_counted() {
    let running = start(Config::default());
    let shared = running.handle.shared().clone();
    let (mut conn, mut bytes) = answered_once(&running).await;
    let stop = Instant::now();
    assert!(running.handle.request_shutdown());
    acknowledge_goaway(&mut conn, &mut bytes).await;
    assert_eq!(goaway_ids(&frames(&bytes)), [0x7fff_ffff, 1]);
    // A well-behaved client closes once its streams are done.
    drop(conn);
    let took = exit_after(running, stop).await;
    assert!(
        took < Duration::from_millis(800),
        "exited {took:?} after the stop"
    );
    assert_eq!(shared.counters().peer_counts().connections_cut(), 0);
}
