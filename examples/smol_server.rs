//! The example server on smol + hyper (`docs/design.md#example-servers`), on a two-thread
//! smol executor; its `/ws` sockets are async-tungstenite's.
//!
//! `cargo run --release --example smol_server -- --listen 127.0.0.1:8080 --shutdown-delay 5s`

use lameduck_examples::{flags, logging, metrics, routes, server, tls};
use lameduck_examples_smol::{exit_with_smol, websocket};
use lameduck_smol::SmolRuntime;

fn main() {
    let flags = flags::from_env_or_exit();
    logging::init();
    metrics::install(); // the Prometheus recorder, before the lifecycle records anything
    let tls = tls::load_or_exit(&flags);
    let sockets = server::open_sockets_or_exit(&flags);
    exit_with_smol(2, |executor| async move {
        let runtime = SmolRuntime::with_executor(executor);
        let adopt = lameduck_smol::from_std;
        let tls = tls.as_ref().map(lameduck_smol::TlsAcceptor::new);
        server::run(&flags, runtime.clone(), sockets, adopt, tls, |server| {
            server.long_running(routes::is_long_running);
            let shared = server.shared().clone();
            let sockets = websocket::async_tungstenite_echo;
            routes::service_with_metrics(runtime, shared, metrics::render, sockets)
        })
        .await
    })
}
