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

use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::future::{select, Either};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use http::Request;
use lameduck::connection::CutKind;
use lameduck::{LifecycleSignalFired, Shared};

use crate::request::notice::ShutdownNotice;
use crate::request::ticket::{LongRunningTicketHolder, UpgradeTicket};
use crate::runtime::Runtime;

/// The close status a server going away sends (RFC 6455, section 7.4.1).
pub const GOING_AWAY: u16 = 1001;

/// The reason sent with the Close.
pub const GOING_AWAY_REASON: &str = "server shutting down";

/// The close status for a client that broke the protocol (RFC 6455, section 7.4.1).
pub const PROTOCOL_ERROR: u16 = 1002;

/// The close status for a message whose data is not of its type: a text message that is not
/// UTF-8 (RFC 6455, sections 7.4.1 and 8.1).
pub const INVALID_PAYLOAD: u16 = 1007;

/// The close status for a message too big to process (RFC 6455, section 7.4.1).
pub const MESSAGE_TOO_BIG: u16 = 1009;

/// The reason sent with `status`, a close status that answers a socket's error
/// ([`MessageKind::error_status`]).
#[must_use]
pub fn error_reason(status: u16) -> &'static str {
    match status {
        INVALID_PAYLOAD => "invalid payload data",
        MESSAGE_TOO_BIG => "message too big",
        _ => "protocol error",
    }
}

/// How long before the end of the grace period a silent client is cut, so that the drain
/// ends with the socket, not by its timer: 100 ms, or half of what is left after the Close
/// when that is shorter.
pub const CUT_AHEAD: Duration = Duration::from_millis(100);

/// How long a client may take to answer the Close when the drain has no grace period (the
/// server does not wait for long-running requests then, so the exit may come sooner): 1 s.
pub const CLOSE_TIMEOUT_WITHOUT_GRACE: Duration = Duration::from_secs(1);

/// An upgraded connection's place in the drain: keeps it counted while alive, and knows when
/// its turn to end comes and how long its goodbye may take.
pub struct WebSocketShutdown {
    notice: ShutdownNotice,
    /// Strong: the long-running ticket inside stays held until this is dropped.
    holder: Option<Arc<LongRunningTicketHolder>>,
}

impl fmt::Debug for WebSocketShutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketShutdown")
            .field("notice", &self.notice)
            .field("counted", &self.holder.is_some())
            .finish()
    }
}

impl WebSocketShutdown {
    /// The upgrade's place from the request (call it in the handler, before answering
    /// `101`, and move it into the task that serves the socket). `None` when the admission
    /// layer did not admit the request as long-running (no [`ShutdownNotice`] extension).
    pub fn take<B>(req: &Request<B>) -> Option<Self> {
        let notice = req.extensions().get::<ShutdownNotice>()?;
        Some(Self::from_parts(
            notice,
            req.extensions().get::<UpgradeTicket>(),
        ))
    }

    /// The same from the two extensions the admission layer sets, for adapters whose request
    /// type is not [`http::Request`] (actix-web). Without `upgrade` (not an upgrade request, or
    /// a layer that does not track upgrades) the connection is not counted and its turn is
    /// "at once".
    #[must_use]
    pub fn from_parts(notice: &ShutdownNotice, upgrade: Option<&UpgradeTicket>) -> Self {
        WebSocketShutdown {
            notice: notice.clone(),
            holder: upgrade.map(|u| Arc::clone(&u.0)),
        }
    }

    /// The lifecycle's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.notice.shared()
    }

    /// The notice, which resolves when the server stops accepting.
    #[must_use]
    pub fn notice(&self) -> &ShutdownNotice {
        &self.notice
    }

    /// Resolves at the socket's turn to end: once the server stops accepting, at the turn
    /// reserved for it in the paced drain (at once when there is none).
    pub async fn turn<R: Runtime>(&self, runtime: &R) {
        self.notice.wait().await;
        if let Some(at) = self.reserve_turn(runtime.now()) {
            runtime.sleep_until(at).await;
        }
    }

    /// See [`ShutdownNotice::reserve_turn`].
    fn reserve_turn(&self, now: Instant) -> Option<Instant> {
        let holder = self.holder.as_ref()?;
        if !self.notice.is_fired() {
            return None;
        }
        holder.reserve_turn(now)
    }

    /// Notes that the socket's connection closes now (the termination summary's
    /// `last_connection_closed`): the helpers call it when the goodbye is over.
    pub fn note_closed<R: Runtime>(&self, runtime: &R) {
        let shared = self.shared();
        if let Some(holder) = &self.holder {
            if shared.has_fired(lameduck::LifecycleSignal::ShutdownInitiated) {
                shared
                    .counters()
                    .note_connection_closed(holder.clock.instant(runtime.now()));
            }
        }
    }

    /// Until when a client told goodbye at `now` may take to answer: [`CUT_AHEAD`] before the
    /// end of the grace period, or [`CLOSE_TIMEOUT_WITHOUT_GRACE`] after `now` without one.
    #[must_use]
    pub fn answer_deadline(&self, now: Instant) -> Instant {
        let end = self.holder.as_ref().and_then(|holder| {
            let deadline = self.shared().gate().long_running_deadline()?;
            Some(holder.clock.to_std(deadline))
        });
        match end {
            Some(end) => {
                let left = end.saturating_duration_since(now);
                end - CUT_AHEAD.min(left / 2)
            }
            None => now + CLOSE_TIMEOUT_WITHOUT_GRACE,
        }
    }
}

/// What a WebSocket crate's message type must say for the goodbye: how to make a Close with
/// a status and a reason, and how to tell a Close apart: `TUNGSTENITE` (feature
/// `tungstenite`) for tokio-tungstenite and async-tungstenite, `lameduck_tokio::websocket::AXUM`
/// for axum's `ws`.
pub struct MessageKind<M, E> {
    /// A Close message with this status and reason.
    pub close: fn(u16, &'static str) -> M,
    /// Whether a message is a Close.
    pub is_close: fn(&M) -> bool,
    /// The close status that answers an error of the socket (`E`): [`INVALID_PAYLOAD`] for a
    /// text message that is not UTF-8, [`MESSAGE_TOO_BIG`] for one over the crate's limit,
    /// [`PROTOCOL_ERROR`] for the rest.
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

/// How a socket's goodbye went ([`GoingAway::close`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseOutcome {
    /// The server sent Close 1001 and the client answered with its Close: the handshake is
    /// complete.
    Answered,
    /// The client did not answer by the bound: the connection was cut (and counted).
    Cut,
    /// The client closed first (or the server's handler ended before the shutdown); the
    /// server answered its Close.
    ClientClosed,
    /// The connection ended or failed (a protocol error, a reset) before the handshake was
    /// complete, or not even the Close could be written by the bound (a client that does not
    /// read).
    Failed,
}

/// Where the socket's turn stands.
enum Turn<S> {
    /// Before the notice.
    Serving(Pin<Box<LifecycleSignalFired>>),
    /// After it, until the reserved turn.
    Waiting(Pin<Box<S>>),
    /// The turn came.
    Due,
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
    turn: Turn<R::Sleep>,
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
        let turn = Turn::Serving(Box::pin(shutdown.notice.wait()));
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
        matches!(self.turn, Turn::Due)
    }

    fn poll_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.turn {
                Turn::Serving(fired) => {
                    if fired.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.turn = match self.shutdown.reserve_turn(self.runtime.now()) {
                        Some(at) => Turn::Waiting(Box::pin(self.runtime.sleep_until(at))),
                        None => Turn::Due,
                    };
                }
                Turn::Waiting(sleep) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.turn = Turn::Due;
                }
                Turn::Due => return Poll::Ready(()),
            }
        }
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
        let shared = Arc::clone(self.shutdown.shared());
        let close = (self.kind.close)(GOING_AWAY, GOING_AWAY_REASON);
        let is_close = self.kind.is_close;
        let sent = AtomicBool::new(false);
        let goodbye = async {
            if self.socket.send(close).await.is_err() {
                return CloseOutcome::Failed;
            }
            sent.store(true, Ordering::Relaxed);
            shared.counters().count_websocket_close_sent();
            // Messages the client sent before it saw the Close are dropped.
            while let Some(message) = self.socket.next().await {
                match message {
                    Ok(m) if is_close(&m) => {
                        shared.counters().count_websocket_close_answered();
                        return CloseOutcome::Answered;
                    }
                    Ok(_) => {}
                    Err(_) => return CloseOutcome::Failed,
                }
            }
            CloseOutcome::Failed
        };
        let cut = self.runtime.sleep_until(deadline);
        let outcome = match select(pin!(goodbye), pin!(cut)).await {
            Either::Left((outcome, _)) => outcome,
            // Not even the Close could be written by then (a client that does not read).
            Either::Right(_) if !sent.load(Ordering::Relaxed) => {
                shared
                    .counters()
                    .count_connection_cut(CutKind::WebsocketClose);
                CloseOutcome::Failed
            }
            Either::Right(_) => {
                shared
                    .counters()
                    .count_connection_cut(CutKind::WebsocketClose);
                CloseOutcome::Cut
            }
        };
        self.shutdown.note_closed(&self.runtime);
        outcome
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
        if this.client_closed || this.ended || this.poll_turn(cx).is_ready() {
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
