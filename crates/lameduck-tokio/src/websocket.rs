//! The WebSocket goodbye on tokio: [`lameduck_hyper::websocket`]'s [`GoingAway`] with the
//! [`MessageKind`] of tokio-tungstenite (feature `tungstenite`) and of axum's `ws` (feature
//! `axum`).
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # mod example {
//! use axum::extract::ws::{WebSocket, WebSocketUpgrade};
//! use axum::extract::Request;
//! use axum::response::Response;
//! use futures_util::{SinkExt, StreamExt};
//! use lameduck_tokio::websocket::{going_away, WebSocketShutdown, AXUM};
//!
//! /// `GET /ws`: echoes until the socket's turn in the drain, then Close 1001.
//! async fn ws(req: Request) -> Response {
//!     let shutdown = WebSocketShutdown::take(&req);
//!     let (mut parts, _) = req.into_parts();
//!     let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
//!         Ok(upgrade) => upgrade,
//!         Err(rejection) => return rejection.into_response(),
//!     };
//!     upgrade.on_upgrade(move |socket: WebSocket| async move {
//!         let Some(shutdown) = shutdown else { return };
//!         let mut ws = going_away(shutdown, socket, AXUM);
//!         while let Some(Ok(message)) = ws.next().await {
//!             if ws.send(message).await.is_err() {
//!                 break;
//!             }
//!         }
//!         ws.close().await;
//!     })
//! }
//! # use axum::extract::FromRequestParts;
//! # use axum::response::IntoResponse;
//! # }
//! ```

pub use lameduck_hyper::websocket::{
    error_reason, CloseOutcome, GoingAway, MessageKind, WebSocketShutdown, GOING_AWAY,
    GOING_AWAY_REASON, INVALID_PAYLOAD, MESSAGE_TOO_BIG, PROTOCOL_ERROR,
};
/// tungstenite's messages (feature `tungstenite`).
#[cfg(feature = "tungstenite")]
pub use lameduck_hyper::websocket::{tungstenite_error_status, TUNGSTENITE};

use crate::TokioRuntime;

/// Wraps `socket` on tokio's clock: see [`GoingAway`].
pub fn going_away<S, M, E>(
    shutdown: WebSocketShutdown,
    socket: S,
    kind: MessageKind<M, E>,
) -> GoingAway<TokioRuntime, S, M, E> {
    GoingAway::new(TokioRuntime, shutdown, socket, kind)
}

/// axum's `ws` messages.
#[cfg(feature = "axum")]
pub const AXUM: MessageKind<axum::extract::ws::Message, axum::Error> = MessageKind {
    close: axum_close,
    is_close: |m| matches!(m, axum::extract::ws::Message::Close(_)),
    error_status: axum_error_status,
};

/// The close status that answers axum's `error`: that of the tungstenite error inside it
/// (see [`MessageKind::error_status`]).
#[cfg(feature = "axum")]
#[must_use]
pub fn axum_error_status(error: &axum::Error) -> u16 {
    use std::error::Error as _;
    error
        .source()
        .and_then(|inner| inner.downcast_ref::<tungstenite::Error>())
        .map_or(PROTOCOL_ERROR, tungstenite_error_status)
}

#[cfg(feature = "axum")]
fn axum_close(code: u16, reason: &'static str) -> axum::extract::ws::Message {
    axum::extract::ws::Message::Close(Some(axum::extract::ws::CloseFrame {
        code,
        reason: reason.into(),
    }))
}
