//! `lameduck_actix::serve` configures the actix server before it is bound (actix fixes its
//! connection callback at bind time), so a server bound beforehand is refused with a typed
//! error instead of being served with connections nobody counts.

use std::time::Duration;

use actix_web::{App, HttpServer};
use lameduck::Config;
use lameduck_actix::ActixServeError;

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
