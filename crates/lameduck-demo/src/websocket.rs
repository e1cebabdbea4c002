//! `GET /ws`: a WebSocket echo that, at shutdown, serves until the socket's turn in the paced
//! long-running drain, then closes with 1001 (Going Away) and waits for the client's Close
//! (`lameduck_hyper::websocket`). Text and binary messages come back as they were sent.
//!
//! The handshake (RFC 6455, section 4.2) is checked here; the upgraded connection is served
//! by a [`ServeSocket`]: tokio-tungstenite's ([`tokio_tungstenite_echo`]) unless the server
//! brings its ecosystem's own (smol_server serves it with async-tungstenite).

use futures_util::future::BoxFuture;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use hyper::upgrade::Upgraded;
use lameduck_hyper::websocket::{GoingAway, MessageKind, WebSocketShutdown};
use lameduck_hyper::Runtime;

use crate::response::{text, RouteBody};

/// Serves an upgraded `/ws` connection as an echo, with its place in the drain (`None` when
/// the request was not admitted as long-running).
pub type ServeSocket<R> = fn(R, Upgraded, Option<WebSocketShutdown>) -> BoxFuture<'static, ()>;

/// The default [`ServeSocket`]: the echo with tokio-tungstenite, over `hyper-util`'s
/// `TokioIo` (which only adapts the I/O traits: it needs no tokio runtime, so it would serve
/// smol's upgrades too); with `shutdown`, it says goodbye at the socket's turn.
pub fn tokio_tungstenite_echo<R: Runtime + Unpin>(
    runtime: R,
    upgraded: Upgraded,
    shutdown: Option<WebSocketShutdown>,
) -> BoxFuture<'static, ()> {
    use tokio_tungstenite::tungstenite::protocol::Role;
    Box::pin(async move {
        let io = hyper_util::rt::TokioIo::new(upgraded);
        let socket =
            tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, None).await;
        let kind = lameduck_hyper::websocket::TUNGSTENITE;
        echo_until_turn(runtime, shutdown, socket, kind, |m| {
            m.is_text() || m.is_binary()
        })
        .await;
    })
}

/// Echoes the data messages (`is_data`) of `socket`; with `shutdown`, until the socket's turn,
/// then says goodbye ([`GoingAway::close`]); without, until the client closes.
pub async fn echo_until_turn<R, S, M, E>(
    runtime: R,
    shutdown: Option<WebSocketShutdown>,
    socket: S,
    kind: MessageKind<M, E>,
    is_data: fn(&M) -> bool,
) where
    R: Runtime + Unpin,
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    match shutdown {
        Some(shutdown) => {
            let mut ws = GoingAway::new(runtime, shutdown, socket, kind);
            echo(&mut ws, is_data).await;
            ws.close().await;
        }
        None => {
            let mut socket = socket;
            echo(&mut socket, is_data).await;
            let _ = socket.close().await;
        }
    }
}

/// Sends every data message back until the stream ends or fails.
async fn echo<S, M, E>(socket: &mut S, is_data: fn(&M) -> bool)
where
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    while let Some(Ok(message)) = socket.next().await {
        if is_data(&message) && socket.send(message).await.is_err() {
            return;
        }
    }
}

/// Why an opening handshake (RFC 6455, section 4.2.1) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// No `Upgrade: websocket` with `Connection: Upgrade`: answered `400`.
    NotAnUpgrade,
    /// A `Sec-WebSocket-Version` other than 13: answered `426` with the version served.
    UnsupportedVersion,
    /// No `Sec-WebSocket-Key`: answered `400`.
    MissingKey,
}

impl HandshakeError {
    /// The answer to the refused handshake.
    #[must_use]
    pub fn response(self) -> Response<RouteBody> {
        match self {
            HandshakeError::NotAnUpgrade => text(
                StatusCode::BAD_REQUEST,
                "expected a WebSocket upgrade (Upgrade: websocket, Connection: Upgrade)\n",
            ),
            HandshakeError::UnsupportedVersion => {
                let mut response = text(
                    StatusCode::UPGRADE_REQUIRED,
                    "unsupported WebSocket version: 13 is served\n",
                );
                response.headers_mut().insert(
                    header::SEC_WEBSOCKET_VERSION,
                    HeaderValue::from_static("13"),
                );
                response
            }
            HandshakeError::MissingKey => {
                text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key\n")
            }
        }
    }
}

/// The `Sec-WebSocket-Accept` of a valid opening handshake.
///
/// # Errors
///
/// [`HandshakeError`] when `headers` are not those of a version-13 WebSocket upgrade.
pub fn accept_key(headers: &HeaderMap) -> Result<String, HandshakeError> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has_token(header::UPGRADE, "websocket") || !has_token(header::CONNECTION, "upgrade") {
        return Err(HandshakeError::NotAnUpgrade);
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION) != Some(&HeaderValue::from_static("13")) {
        return Err(HandshakeError::UnsupportedVersion);
    }
    match headers.get(header::SEC_WEBSOCKET_KEY) {
        Some(key) if !key.is_empty() => {
            Ok(tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()))
        }
        _ => Err(HandshakeError::MissingKey),
    }
}

/// `GET /ws`: checks the opening handshake, answers `101 Switching Protocols`, and serves
/// the upgraded connection with `serve_socket` in a task of `runtime`. The upgrade's place in
/// the drain is taken from the request before the answer.
pub fn ws_route<R: Runtime + Unpin, B: Send + 'static>(
    runtime: R,
    serve_socket: ServeSocket<R>,
    mut req: Request<B>,
) -> Response<RouteBody> {
    let accept = match accept_key(req.headers()) {
        Ok(accept) => accept,
        Err(refused) => return refused.response(),
    };
    let shutdown = WebSocketShutdown::take(&req);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let serve = runtime.clone();
    runtime.spawn(async move {
        if let Ok(upgraded) = on_upgrade.await {
            serve_socket(serve, upgraded, shutdown).await;
        }
    });
    let mut response = text(StatusCode::SWITCHING_PROTOCOLS, "");
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    header::HeaderName::from_static(k),
                    HeaderValue::from_static(v),
                )
            })
            .collect()
    }

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        // The example of RFC 6455, section 1.3.
        let h = headers(&[
            ("upgrade", "websocket"),
            ("connection", "keep-alive, Upgrade"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        assert_eq!(accept_key(&h).unwrap(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn refused_handshakes_say_why() {
        let not = headers(&[("sec-websocket-version", "13"), ("sec-websocket-key", "k")]);
        assert_eq!(accept_key(&not), Err(HandshakeError::NotAnUpgrade));
        let old = headers(&[
            ("upgrade", "WebSocket"),
            ("connection", "upgrade"),
            ("sec-websocket-version", "8"),
            ("sec-websocket-key", "k"),
        ]);
        assert_eq!(accept_key(&old), Err(HandshakeError::UnsupportedVersion));
        let response = HandshakeError::UnsupportedVersion.response();
        assert_eq!(response.status(), StatusCode::UPGRADE_REQUIRED);
        assert_eq!(response.headers()[header::SEC_WEBSOCKET_VERSION], "13");
        let keyless = headers(&[
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-version", "13"),
        ]);
        assert_eq!(accept_key(&keyless), Err(HandshakeError::MissingKey));
        assert_eq!(
            HandshakeError::MissingKey.response().status(),
            StatusCode::BAD_REQUEST
        );
    }
}
