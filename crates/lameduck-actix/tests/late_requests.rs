//! Requests that race a connection's goodbye on actix-web (loopback, real time, generous
//! bounds): when the sockets outlive the process (socket activation, hand-over), a request
//! sent on a kept-alive connection right after the gate closed is served with
//! `Connection: close`, and an idle connection is not closed under it; behind a balancer,
//! a request after the close gets the 503 with `Retry-After` and `Connection: close`.

use std::time::Duration;

use lameduck_test_support::http1::{read_response, GET};

mod support;
use support::{exit_code, prepare_ok_server, spawn_run, Running};

use lameduck::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A running lifecycle (shutdown delay 0) on one loopback listener, its sockets outliving
/// it or not.
fn start(outlive: bool) -> Running {
    let (addr, mut server) = prepare_ok_server(Config::default(), 1);
    if outlive {
        server.sockets_outlive_process();
    }
    spawn_run(addr, server)
}

/// Keep-alive connection, one request served; the gate closes; the next request follows.
async fn request_after_the_close(outlive: bool) -> String {
    let Running { addr, handle, run } = start(outlive);
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(GET).await.unwrap();
    let first = read_response(&mut conn).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(handle.request_shutdown());
    // Shutdown delay 0: wait for the gate to close, as a busy client's next request would
    // find it.
    let shared = handle.shared().clone();
    tokio::time::timeout(
        Duration::from_secs(5),
        shared.signal_fired(lameduck::LifecycleSignal::NotAcceptingNewRequest),
    )
    .await
    .expect("the gate closes");
    tokio::time::sleep(Duration::from_millis(20)).await;
    conn.write_all(GET).await.unwrap();
    let second = read_response(&mut conn).await;
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(0) | Err(_))),
        "the connection stayed open"
    );
    let code = exit_code(run, Duration::from_secs(10)).await;
    assert_eq!(code, 0);
    second
}

#[actix_web::test]
async fn sockets_outlive_a_request_on_a_kept_alive_connection_after_the_close_is_served() {
    let reply = request_after_the_close(true).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "not served: {reply}");
    assert!(reply.ends_with("ok"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("connection: close"),
        "{reply}"
    );
}

#[actix_web::test]
async fn behind_a_balancer_a_request_after_the_close_gets_503_that_closes_the_connection() {
    let reply = request_after_the_close(false).await;
    if reply.is_empty() {
        // actix closed the idle keep-alive connection at the stop, before the request came
        // (Go's `Server.Shutdown` does the same): nothing was answered, nothing served.
        return;
    }
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    let lower = reply.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1"), "{reply}");
    assert!(lower.contains("connection: close"), "{reply}");
}
