//! WebSockets at shutdown: a socket keeps serving until its turn in the paced long-running
//! drain, then the server sends Close with status 1001 (Going Away), waits for the client's
//! Close for what is left of the grace period, and only then lets the connection go. A
//! client that never answers is cut at that bound and counted (`websocket_unanswered` in the
//! termination summary); the drain never waits past its grace period for it.
//!
//! An upgraded connection outlives its `101` response, so the admission layer cannot see its
//! end by itself. [`WebSocketShutdown::take`] takes the upgrade's place in the drain from the
//! request: while it is alive the connection stays counted, and it knows the connection's
//! turn. [`GoingAway`] wraps the socket of any WebSocket crate whose socket is a `Stream` of
//! messages and a `Sink` of them (tokio-tungstenite, async-tungstenite, axum's `ws`): its
//! stream of messages ends at the turn, and [`GoingAway::close`] is the goodbye, in one call.
//! The crate's messages are described by a [`MessageKind`].
//!
//! The goodbye itself is written once, without its I/O, for every adapter: [`SocketTurn`] is a
//! socket's turn, polled beside its messages, and [`say_goodbye`] sends Close 1001, waits for
//! the client's Close until a deadline, and counts the goodbye (the Close sent, its answer, a
//! cut) over what a socket does ([`GoodbyeIo`]). [`GoingAway`] is them over a `Stream` and
//! `Sink` socket; lameduck-actix's is them over actix-ws's session and stream.
//!
//! ```no_run
//! use futures_util::{SinkExt, StreamExt};
//! use lameduck_hyper::websocket::{GoingAway, MessageKind, WebSocketShutdown};
//! use lameduck_hyper::Runtime;
//!
//! /// Echoes text until the socket's turn, then says goodbye.
//! async fn echo<R, S, M, E>(
//!     runtime: R,
//!     shutdown: WebSocketShutdown,
//!     socket: S,
//!     kind: MessageKind<M, E>,
//! )
//! where
//!     R: Runtime + Unpin,
//!     S: futures_util::Stream<Item = Result<M, E>> + futures_util::Sink<M, Error = E> + Unpin,
//! {
//!     let mut ws = GoingAway::new(runtime, shutdown, socket, kind);
//!     while let Some(Ok(message)) = ws.next().await {
//!         if ws.send(message).await.is_err() {
//!             break;
//!         }
//!     }
//!     ws.close().await;
//! }
//! ```

// `shutdown` is a socket's place in the drain and the goodbye's constants; `goodbye` the
// goodbye without its I/O (every adapter's, actix-web's included); `going_away` the socket
// wrapper for `Stream` + `Sink` sockets.
mod going_away;
mod goodbye;
mod shutdown;

#[cfg(feature = "tungstenite")]
pub use going_away::{tungstenite_error_status, TUNGSTENITE};
pub use going_away::{GoingAway, MessageKind};
pub use goodbye::{say_goodbye, GoodbyeIo, Received, SocketTurn};
pub use shutdown::{
    error_reason, CloseOutcome, WebSocketShutdown, CLOSE_TIMEOUT_WITHOUT_GRACE, CUT_AHEAD,
    GOING_AWAY, GOING_AWAY_REASON, INVALID_PAYLOAD, MESSAGE_TOO_BIG, PROTOCOL_ERROR,
};
