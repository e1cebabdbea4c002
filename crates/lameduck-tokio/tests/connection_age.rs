//! Maximum connection age (`Config::max_connection_age`, gRPC's `MAX_CONNECTION_AGE`), under
//! tokio's paused clock with in-memory connections: at its age (drawn within +-10 %) an idle
//! HTTP/1 connection is closed, a busy one answers with `Connection: close`, an HTTP/2 one
//! gets the two-step GOAWAY; after the grace, work still in flight is cut and counted.

use std::time::Duration;

use bytes::Bytes;
use lameduck::connection::CutKind;
use lameduck::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

mod support;
use support::Run;

use lameduck_test_support::h2::{
    answered_ok, frames, get_frame, ping_ack, read_frames_until, GOAWAY, H2_START, PING,
};
use lameduck_test_support::http1::{read_response, GET};

/// A server (no signal handlers) serving one in-memory connection with a handler that
/// answers `ok` after `delay`, connections aging at `age` with `grace`.
fn serve(
    age: Duration,
    grace: Duration,
    delay: Duration,
) -> (DuplexStream, lameduck_hyper::Handle, Run) {
    let config = Config::builder()
        .max_connection_age(age)
        .max_connection_age_grace(grace)
        .build()
        .unwrap();
    let service = support::slow(delay, Bytes::from_static(b"ok"));
    let (mut clients, handle, run) =
        support::serve_in_memory(1, 8192, support::prepare(config), service);
    (clients.remove(0), handle, run)
}

/// Waits until the server closes `client`; how long after `from` that was.
async fn closed_after(client: &mut DuplexStream, from: Instant) -> Duration {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(30), client.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return from.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("never closed"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_http1_connection_is_closed_at_its_age() {
    let (mut client, handle, run) = serve(Duration::from_secs(10), Duration::ZERO, Duration::ZERO);
    let opened = Instant::now();
    client.write_all(GET).await.unwrap();
    let reply = read_response(&mut client).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        !reply.to_lowercase().contains("connection: close"),
        "{reply}"
    );
    let took = closed_after(&mut client, opened).await;
    assert!(
        took >= Duration::from_secs(9) && took <= Duration::from_secs(11),
        "closed {took:?} after it opened (age 10 s +- 10 %)"
    );
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_busy_http1_connection_answers_with_connection_close_at_its_age() {
    let (mut client, handle, run) = serve(
        Duration::from_secs(10),
        Duration::ZERO,
        Duration::from_secs(3),
    );
    tokio::time::sleep(Duration::from_millis(8500)).await;
    // Its response comes at 11.5 s, past its age (9 to 11 s).
    client.write_all(GET).await.unwrap();
    let reply = read_response(&mut client).await.to_lowercase();
    assert!(reply.starts_with("http/1.1 200"), "{reply}");
    assert!(reply.contains("connection: close"), "{reply}");
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_http2_connection_gets_goaway_at_its_age_and_a_stream_past_the_grace_is_cut() {
    let (mut client, handle, run) = serve(
        Duration::from_secs(10),
        Duration::from_secs(2),
        Duration::from_secs(60),
    );
    let shared = handle.shared().clone();
    let opened = Instant::now();
    client.write_all(H2_START).await.unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    // A stream that would take a minute.
    client.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    read_frames_until(&mut client, &mut bytes, |f| {
        f.iter().any(|f| f.kind == GOAWAY)
    })
    .await;
    let goaway_after = opened.elapsed();
    assert!(
        goaway_after >= Duration::from_secs(9) && goaway_after <= Duration::from_secs(11),
        "GOAWAY {goaway_after:?} after it opened"
    );
    // The client answers the PING: the final GOAWAY names stream 1.
    let ping = frames(&bytes)
        .into_iter()
        .find(|f| f.kind == PING)
        .map(|f| f.payload)
        .expect("a PING with the GOAWAY");
    client.write_all(&ping_ack(&ping)).await.unwrap();
    // The stream outlasts the grace: the connection is cut then.
    let cut_after = closed_after(&mut client, opened).await;
    assert!(
        cut_after >= goaway_after + Duration::from_secs(2)
            && cut_after <= goaway_after + Duration::from_millis(2100),
        "cut {cut_after:?} after it opened, GOAWAY at {goaway_after:?}"
    );
    assert!(!answered_ok(&frames(&bytes), 1));
    let peers = shared.counters().peer_counts();
    assert_eq!(peers.cut_since_start[CutKind::MaxConnectionAge.index()], 1);
    // Before the signal: not the termination's.
    assert_eq!(peers.connections_cut(), 0);
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn without_the_option_a_connection_never_ages() {
    let (mut client, handle, run) = serve(Duration::ZERO, Duration::ZERO, Duration::ZERO);
    // An hour of requests, one every 20 s (within the header-read timeout).
    for _ in 0..180 {
        client.write_all(GET).await.unwrap();
        let reply = read_response(&mut client).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(
            !reply.to_lowercase().contains("connection: close"),
            "{reply}"
        );
        tokio::time::sleep(Duration::from_secs(20)).await;
    }
    handle.request_shutdown();
    assert_eq!(run.await.unwrap().unwrap(), 0);
}
