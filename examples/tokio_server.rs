//! The example server on tokio + hyper (`docs/design.md#example-servers`).
//!
//! `cargo run --release --example tokio_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_tokio::TokioRuntime;

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    metrics::install(); // the Prometheus recorder, before the lifecycle records anything
    let tls = tls::load_or_exit(&flags);
    let sockets = server::open_sockets_or_exit(&flags);
    server::exit_with_tokio(|| async move {
        let adopt = lameduck_tokio::from_std;
        let tls = tls.as_ref().map(lameduck_tokio::TlsAcceptor::new);
        server::run(&flags, TokioRuntime, sockets, adopt, tls, |server| {
            server.long_running(routes::is_long_running);
            routes::service_with_metrics(
                TokioRuntime,
                server.shared().clone(),
                metrics::render,
                routes::tokio_tungstenite_echo,
            )
        })
        .await
    })
}
