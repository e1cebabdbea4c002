//! [`GoingAway`]: the goodbye for the sockets of WebSocket crates whose socket is a `Stream` of
//! messages and a `Sink` of them, described by a [`MessageKind`].

use std::fmt;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use futures_util::future::{select, Either};
use futures_util::{Sink, SinkExt, Stream, StreamExt};

use crate::runtime::Runtime;
use crate::websocket::goodbye::{say_goodbye, GoodbyeIo, Received, SocketTurn};
use crate::websocket::shutdown::{
    error_reason, CloseOutcome, WebSocketShutdown, GOING_AWAY, GOING_AWAY_REASON,
};
#[cfg(feature = "tungstenite")]
use crate::websocket::shutdown::{INVALID_PAYLOAD, MESSAGE_TOO_BIG, PROTOCOL_ERROR};

/// What a WebSocket crate's message type must say for the goodbye: how to make a Close with
/// a status and a reason, and how to tell a Close apart: `TUNGSTENITE` (feature
/// `tungstenite`) for tokio-tungstenite and async-tungstenite, `lameduck_tokio::websocket::AXUM`
/// for axum's `ws`.
pub struct MessageKind<M, E> {
    /// A Close message with this status and reason.
    pub close: fn(u16, &'static str) -> M,
    /// Whether a message is a Close.
    pub is_close: fn(&M) -> bool,
    /// The close status that answers an error of the socket (`E`):
    /// [`INVALID_PAYLOAD`](crate::websocket::INVALID_PAYLOAD) for a text message that is not
    /// UTF-8, [`MESSAGE_TOO_BIG`](crate::websocket::MESSAGE_TOO_BIG) for one over the crate's
    /// limit, [`PROTOCOL_ERROR`](crate::websocket::PROTOCOL_ERROR) for the rest.
    pub error_status: fn(&E) -> u16,
}

impl<M, E> Clone for MessageKind<M, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M, E> Copy for MessageKind<M, E> {}

impl<M, E> fmt::Debug for MessageKind<M, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MessageKind")
    }
}

/// tungstenite's messages: the sockets of tokio-tungstenite and async-tungstenite (feature
/// `tungstenite`).
#[cfg(feature = "tungstenite")]
pub const TUNGSTENITE: MessageKind<tungstenite::Message, tungstenite::Error> = MessageKind {
    close: tungstenite_close,
    is_close: tungstenite::Message::is_close,
    error_status: tungstenite_error_status,
};

/// The close status that answers tungstenite's `error` (see [`MessageKind::error_status`]).
#[cfg(feature = "tungstenite")]
#[must_use]
pub fn tungstenite_error_status(error: &tungstenite::Error) -> u16 {
    match error {
        tungstenite::Error::Utf8(_) => INVALID_PAYLOAD,
        tungstenite::Error::Capacity(_) => MESSAGE_TOO_BIG,
        _ => PROTOCOL_ERROR,
    }
}

#[cfg(feature = "tungstenite")]
fn tungstenite_close(code: u16, reason: &'static str) -> tungstenite::Message {
    tungstenite::Message::Close(Some(tungstenite::protocol::CloseFrame {
        code: code.into(),
        reason: reason.into(),
    }))
}
/// A socket of a [`MessageKind`], for [`say_goodbye`].
struct KindSocket<S, M, E> {
    socket: S,
    kind: MessageKind<M, E>,
}

impl<S, M, E> GoodbyeIo for KindSocket<S, M, E>
where
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    async fn send_going_away(&mut self) -> bool {
        let close = (self.kind.close)(GOING_AWAY, GOING_AWAY_REASON);
        self.socket.send(close).await.is_ok()
    }

    async fn next_received(&mut self) -> Option<Received> {
        Some(match self.socket.next().await? {
            Ok(m) if (self.kind.is_close)(&m) => Received::Close,
            Ok(_) => Received::Other,
            Err(_) => Received::Error,
        })
    }
}
/// A WebSocket whose stream of messages ends at its turn in the paced drain, and whose
/// [`GoingAway::close`] says goodbye with Close 1001. It is a `Sink` of messages as the
/// socket it wraps is.
///
/// The stream also ends when the client sends Close (the Close is not passed on; `close`
/// answers it). Errors of the socket pass on as they are; after one, end the loop and call
/// `close`, which answers it with the protocol's error close.
pub struct GoingAway<R: Runtime, S, M, E> {
    runtime: R,
    shutdown: WebSocketShutdown,
    socket: S,
    kind: MessageKind<M, E>,
    turn: SocketTurn<R>,
    client_closed: bool,
    ended: bool,
    /// The socket gave an error (a protocol violation, most often): `close` answers with
    /// this status ([`MessageKind::error_status`]).
    errored: Option<u16>,
}

impl<R: Runtime, S, M, E> fmt::Debug for GoingAway<R, S, M, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoingAway")
            .field("shutdown", &self.shutdown)
            .field("client_closed", &self.client_closed)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, S, M, E> GoingAway<R, S, M, E> {
    /// Wraps `socket`, whose place in the drain is `shutdown`.
    pub fn new(
        runtime: R,
        shutdown: WebSocketShutdown,
        socket: S,
        kind: MessageKind<M, E>,
    ) -> Self {
        let turn = SocketTurn::new(runtime.clone(), &shutdown);
        GoingAway {
            runtime,
            shutdown,
            socket,
            kind,
            turn,
            client_closed: false,
            ended: false,
            errored: None,
        }
    }

    /// The socket, to use it directly.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.socket
    }

    /// Whether the socket's turn to end has come.
    #[must_use]
    pub fn is_due(&self) -> bool {
        self.turn.is_due()
    }
}

impl<R, S, M, E> GoingAway<R, S, M, E>
where
    R: Runtime,
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    /// Says goodbye: sends Close 1001 with [`GOING_AWAY_REASON`], waits for the client's
    /// Close until [`WebSocketShutdown::answer_deadline`], then lets the connection go
    /// (dropping the socket closes it; the drain counts it as ended). A client that closed
    /// first gets its answer instead, and one whose socket gave an error (garbage frames, an
    /// invalid close code, data after its Close, text that is not UTF-8) gets the close
    /// status [`MessageKind::error_status`] gives. Every write is bounded by the same
    /// deadline, so a client that does not read cannot hold it. Never fails: how it went is
    /// the outcome.
    pub async fn close(mut self) -> CloseOutcome {
        if self.ended {
            return CloseOutcome::Failed;
        }
        let now = self.runtime.now();
        let deadline = self.shutdown.answer_deadline(now);
        if let Some(status) = self.errored {
            let close = (self.kind.close)(status, error_reason(status));
            let send = self.socket.send(close);
            let _ = select(pin!(send), pin!(self.runtime.sleep_until(deadline))).await;
            return CloseOutcome::Failed;
        }
        if self.client_closed {
            // The crates queue the answer to a received Close; closing the sink flushes it.
            let answer = self.socket.close();
            return match select(pin!(answer), pin!(self.runtime.sleep_until(deadline))).await {
                Either::Left(_) => CloseOutcome::ClientClosed,
                Either::Right(_) => CloseOutcome::Failed,
            };
        }
        let socket = KindSocket {
            socket: self.socket,
            kind: self.kind,
        };
        say_goodbye(&self.runtime, &self.shutdown, socket, deadline).await
    }
}

impl<R, S, M, E> Stream for GoingAway<R, S, M, E>
where
    R: Runtime + Unpin,
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    type Item = Result<M, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Every field is Unpin (the futures are boxed), so the wrapper is too.
        let this = self.get_mut();
        if this.client_closed || this.ended || this.turn.poll_turn(&this.shutdown, cx).is_ready() {
            return Poll::Ready(None);
        }
        match this.socket.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(m))) if (this.kind.is_close)(&m) => {
                this.client_closed = true;
                Poll::Ready(None)
            }
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.errored = Some((this.kind.error_status)(&e));
                Poll::Ready(Some(Err(e)))
            }
            other => other,
        }
    }
}

impl<R, S, M, E> Sink<M> for GoingAway<R, S, M, E>
where
    R: Runtime + Unpin,
    S: Sink<M, Error = E> + Unpin,
{
    type Error = E;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E>> {
        self.get_mut().socket.poll_ready_unpin(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: M) -> Result<(), E> {
        self.get_mut().socket.start_send_unpin(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E>> {
        self.get_mut().socket.poll_flush_unpin(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E>> {
        self.get_mut().socket.poll_close_unpin(cx)
    }
}
