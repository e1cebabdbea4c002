//! `lameduck_actix::serve` configures the actix server before it is bound (actix fixes its
//! connection callback at bind time), so a server bound beforehand is refused with a typed
//! error instead of being served with connections nobody counts; on actix-web's own
//! `HttpServer`, whose HTTP/2 connections get no GOAWAY, what is still open shortly after the
//! drain is closed by stopping actix forcibly, and counted.

use std::time::{Duration, Instant};

use actix_web::{App, HttpServer};
use lameduck::connection::CutKind;
use lameduck::Config;
use lameduck_actix::{ActixServeError, CLOSE_AFTER_DRAIN};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use lameduck_test_support::h2::{answered, get_frame, read_until, H2_START};

mod support;
use support::{exit_code, start_actix_web, Running};

#[actix_web::test]
async fn a_server_bound_before_serve_is_refused() {
    let mut server = lameduck_actix::builder(Config::default()).prepare();
    let bound = HttpServer::new(App::new)
        .workers(1)
        .bind("127.0.0.1:0")
        .unwrap();
    let err = lameduck_actix::serve(&mut server, "api", bound, Ok).unwrap_err();
    assert!(matches!(err, ActixServeError::AlreadyBound), "{err}");
    assert!(err.to_string().contains("closure"), "{err}");
}

#[actix_web::test]
async fn bind_errors_and_empty_binds_are_typed() {
    let mut server = lameduck_actix::builder(Config::default()).prepare();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = lameduck_actix::serve(
        &mut server,
        "api",
        HttpServer::new(App::new).workers(1),
        move |http| http.bind(addr),
    )
    .unwrap_err();
    assert!(matches!(err, ActixServeError::Bind(_)), "{err}");
    let err =
        lameduck_actix::serve(&mut server, "admin", HttpServer::new(App::new), Ok).unwrap_err();
    assert!(matches!(err, ActixServeError::NothingBound), "{err}");
}

#[test]
fn actix_shutdown_timeout_is_above_every_bound() {
    let config = Config::builder()
        .request_timeout(Duration::from_secs(60))
        .shutdown_watch_termination_grace_period(Duration::from_secs(300))
        .build()
        .unwrap();
    // max(60 s, 300 s) + the 60 s HTTP shutdown timeout of close-listener mode, plus a margin.
    assert!(lameduck_actix::actix_shutdown_timeout(&config) > Duration::from_secs(360));
    let unbounded = Config::builder()
        .request_timeout(Duration::ZERO)
        .build()
        .unwrap();
    assert!(lameduck_actix::actix_shutdown_timeout(&unbounded) >= Duration::from_secs(86_400));
}

#[actix_web::test]
async fn an_idle_http2_connection_of_actix_webs_own_server_is_closed_after_the_drain_and_counted() {
    let Running { addr, handle, run } = start_actix_web(Config::default(), true);

    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(H2_START).await.unwrap();
    conn.write_all(&get_frame(1, "/")).await.unwrap();
    let mut bytes = Vec::new();
    let wait = Duration::from_secs(10);
    assert!(read_until(&mut conn, &mut bytes, wait, |f| answered(f, 1)).await);

    // Idle, and never told GOAWAY: closed by the forced stop shortly after the drain.
    let stop = Instant::now();
    assert!(handle.request_shutdown());
    let code = exit_code(run, wait).await;
    assert_eq!(code, 0);
    let took = stop.elapsed();
    assert!(
        took >= CLOSE_AFTER_DRAIN && took <= Duration::from_millis(1500),
        "exited {took:?} after the stop"
    );
    let peers = handle.shared().counters().peer_counts();
    assert_eq!(
        peers.cut_in_termination(CutKind::RequestHead),
        1,
        "{peers:?}"
    );
    assert_eq!(peers.connections_cut(), 1, "{peers:?}");
    drop(conn);
}
