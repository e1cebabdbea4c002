//! The WebSocket goodbye on smol: [`lameduck_hyper::websocket`]'s [`GoingAway`] with the
//! [`MessageKind`] of async-tungstenite (feature `tungstenite`).
//!
//! A handler takes the upgrade's place with [`WebSocketShutdown::take`] before answering
//! `101`, wraps the upgraded socket with [`going_away`], serves until the wrapper's stream
//! ends (the socket's turn in the drain, or the client's Close), then calls
//! [`GoingAway::close`].

pub use lameduck_hyper::websocket::{
    error_reason, CloseOutcome, GoingAway, MessageKind, WebSocketShutdown, GOING_AWAY,
    GOING_AWAY_REASON, INVALID_PAYLOAD, MESSAGE_TOO_BIG, PROTOCOL_ERROR,
};
/// tungstenite's messages (feature `tungstenite`).
#[cfg(feature = "tungstenite")]
pub use lameduck_hyper::websocket::{tungstenite_error_status, TUNGSTENITE};

use crate::SmolRuntime;

/// Wraps `socket` on async-io's clock: see [`GoingAway`].
pub fn going_away<S, M, E>(
    shutdown: WebSocketShutdown,
    socket: S,
    kind: MessageKind<M, E>,
) -> GoingAway<SmolRuntime, S, M, E> {
    GoingAway::new(SmolRuntime::global(), shutdown, socket, kind)
}

/// A hyper connection's I/O (an upgraded connection: `hyper::upgrade::Upgraded`) as
/// `futures-io`'s `AsyncRead` and `AsyncWrite`, which async-tungstenite reads and writes.
#[derive(Debug)]
pub struct UpgradedIo<T>(pub T);

impl<T: hyper::rt::Read + Unpin> futures_util::io::AsyncRead for UpgradedIo<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut read = hyper::rt::ReadBuf::new(buf);
        match std::pin::Pin::new(&mut self.0).poll_read(cx, read.unfilled()) {
            std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(Ok(read.filled().len())),
            std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: hyper::rt::Write + Unpin> futures_util::io::AsyncWrite for UpgradedIo<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
