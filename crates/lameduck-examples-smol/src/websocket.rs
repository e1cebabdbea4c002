//! smol_server's `/ws` sockets, served with async-tungstenite (the WebSocket crate of smol's
//! ecosystem) over `lameduck_smol::websocket::UpgradedIo`; the other hyper-based servers
//! serve theirs with tokio-tungstenite (`routes::tokio_tungstenite_echo`).

use futures_util::future::BoxFuture;
use hyper::upgrade::Upgraded;
use lameduck_smol::websocket::{UpgradedIo, WebSocketShutdown, TUNGSTENITE};
use lameduck_smol::SmolRuntime;

use lameduck_examples::routes;

/// A [`routes::ServeSocket`]: the `/ws` echo with async-tungstenite, saying goodbye (Close
/// 1001) at the socket's turn in the drain.
pub fn async_tungstenite_echo(
    runtime: SmolRuntime,
    upgraded: Upgraded,
    shutdown: Option<WebSocketShutdown>,
) -> BoxFuture<'static, ()> {
    use async_tungstenite::tungstenite::protocol::Role;
    Box::pin(async move {
        let io = UpgradedIo(upgraded);
        let socket =
            async_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, None).await;
        let is_data = |m: &async_tungstenite::tungstenite::Message| m.is_text() || m.is_binary();
        routes::echo_until_turn(runtime, shutdown, socket, TUNGSTENITE, is_data).await;
    })
}
