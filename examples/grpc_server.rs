//! The gRPC example server: tonic over lameduck-tokio (`docs/design.md#grpc`), with the
//! flags, stdout line, logs and exit codes of every example server
//! (`docs/design.md#example-servers`).
//!
//! `cargo run --release --example grpc_server -- --listen 127.0.0.1:50051 --shutdown-delay 5s`
//!
//! gRPC calls (content-type `application/grpc*`) go to `grpc.health.v1.Health` and
//! `lameduck.example.Demo`; other requests to the HTTP routes of the other examples, so
//! `/readyz` and friends answer as everywhere.

use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_examples_grpc::grpc::{Demo, SERVICE, TICKS};
use lameduck_tokio::TokioRuntime;

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    let tls = tls::load_or_exit(&flags);
    let mut sockets = server::open_sockets_or_exit(&flags);
    server::exit_with_tokio(|| async move {
        let mut server = match server::builder(&flags, TokioRuntime) {
            Ok(b) => b.prepare(),
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        // The gRPC example serves one socket: the first one opened.
        let first = sockets.listeners.drain(..).next().map(|l| l.listener);
        let listener = match first.map(lameduck_tokio::from_std) {
            Some(Ok(l)) => l,
            None => {
                eprintln!("error: no socket to serve");
                return 1;
            }
            Some(Err(e)) => {
                eprintln!("error: cannot serve the socket: {e}");
                return 1;
            }
        };
        let (reporter, health) = tonic_health::server::health_reporter();
        let grpc_routes = tonic::service::Routes::new(health).add_service(Demo);
        let http = routes::service_with_metrics(
            TokioRuntime,
            server.shared().clone(),
            metrics::render,
            routes::tokio_tungstenite_echo,
        );
        let grpc = lameduck_tonic::Grpc::new()
            .streaming(TICKS)
            .long_running(routes::is_long_running)
            .health(reporter, [SERVICE]);
        let service = lameduck_examples_grpc::grpc::with_http(grpc_routes, http);
        let served = match &tls {
            None => grpc.serve(&mut server, "api", listener, service),
            Some(tls) => {
                let acceptor = lameduck_tokio::TlsAcceptor::new(tls);
                grpc.serve_tls(&mut server, "api", listener, acceptor, service)
            }
        };
        server::configure_sockets(&flags, &mut server, sockets.predecessor, sockets.outlive);
        match served {
            Ok(addr) => server::announce_and_run(server, tls::scheme(tls.as_ref()), &[addr]).await,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    })
}
