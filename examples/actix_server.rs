//! The example server on actix-web (`docs/design.md#example-servers`), with 2 workers by default.
//!
//! `cargo run --release --example actix_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use actix_web::{web, App};
use lameduck_actix::{AdmissionMiddleware, AutoH2cServer, ServerTls};
use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_examples_actix::actix_routes;
use lameduck_tokio::TokioRuntime;

async fn run(
    flags: flags::Flags,
    tls: Option<ServerTls>,
    sockets: lameduck_examples::listen::Sockets,
) -> i32 {
    let mut server = match server::builder(&flags, TokioRuntime) {
        Ok(b) => b.prepare(),
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let listeners: Vec<std::net::TcpListener> =
        sockets.listeners.into_iter().map(|l| l.listener).collect();
    let addrs: Vec<_> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    let shared = server.shared().clone();
    // Admits every request and answers the health endpoints before any route is tried.
    let admission = AdmissionMiddleware::for_server(&server).long_running(routes::is_long_running);
    // HTTP/1 and h2c (or, with TLS, HTTP/1.1 and HTTP/2 by ALPN), the HTTP/2 connections told
    // GOAWAY when kube-apiserver's would be.
    let http = AutoH2cServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .route("/", web::get().to(actix_routes::index))
            .route("/sleep", web::get().to(actix_routes::sleep))
            .route("/watch", web::get().to(actix_routes::watch))
            .route("/events", web::get().to(actix_routes::events))
            .route("/ws", web::get().to(actix_routes::ws))
            .route("/stream", web::get().to(actix_routes::stream))
            .route("/bytes", web::get().to(actix_routes::bytes))
            .route("/metrics", actix_routes::metrics_route(shared.clone()))
    });
    let workers = flags.workers.unwrap_or(2);
    // lameduck configures the actix server (signals, shutdown timeout, connection counting)
    // before this closure binds it, and runs it.
    let scheme = tls::scheme(tls.as_ref());
    let served = lameduck_actix::serve(&mut server, "api", http, move |http| {
        listeners
            .into_iter()
            .try_fold(http.workers(workers), |http, l| match &tls {
                Some(tls) => http.listen_tls(l, tls),
                None => http.listen(l),
            })
    });
    if let Err(e) = served {
        eprintln!("error: {e}");
        return 1;
    }
    server::configure_sockets(&flags, &mut server, sockets.predecessor, sockets.outlive);
    server::announce_and_run(server, scheme, &addrs).await
}

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    metrics::install(); // the Prometheus recorder, before the lifecycle records anything

    // The TLS files are read before any socket is opened: a bad file exits 2 unheard.
    let tls = tls::load_or_exit(&flags);
    let sockets = server::open_sockets_or_exit(&flags);
    actix_web::rt::System::new().block_on(async move {
        let code = run(flags, tls, sockets).await;
        // Exit from inside the runtime: dropping actix's system first would join its worker
        // threads, which only notice the stop at their next one-second shutdown poll.
        std::process::exit(code)
    })
}
