//! WebSockets at shutdown on actix-web, for [`actix_ws`] sessions: a socket keeps serving
//! until its turn in the paced long-running drain, then the server sends Close 1001 (Going
//! Away) with [`GOING_AWAY_REASON`], waits for the client's Close until
//! [`WebSocketShutdown::answer_deadline`] less actix's [`DISCONNECT_LINGER`] and lets the
//! connection go. A client that never
//! answers is cut at that bound and counted (`websocket_unanswered` in the termination
//! summary, and a `websocket_close` among its `connections_cut`). See [`lameduck_hyper::websocket`] for the parts shared with the other adapters.
//!
//! [`handle`] is actix-ws's handshake (`actix_ws::handle`) with the client's disconnect read
//! as the end of its messages, so that a Close the client sends just before closing the
//! connection is not lost. [`shutdown`] takes the upgrade's place in the drain from the
//! request (the [`crate::AdmissionMiddleware`] puts it there for upgrade requests classified
//! long-running); [`GoingAway`] wraps actix-ws's split [`Session`] and [`MessageStream`]: its
//! [`GoingAway::next`] ends at the socket's turn (or at the client's Close), and
//! [`GoingAway::close`] is the goodbye, in one call.
//!
//! ```no_run
//! use actix_web::{web, HttpRequest, HttpResponse};
//! use actix_ws::Message;
//! use lameduck_actix::websocket::{self, GoingAway};
//!
//! async fn ws(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, actix_web::Error> {
//!     let (response, session, stream) = websocket::handle(&req, body)?;
//!     // `None`: the request was not admitted as long-running (no middleware in front).
//!     let Some(shutdown) = websocket::shutdown(&req) else {
//!         return Ok(response);
//!     };
//!     // actix-ws's session and stream are served from a task of the worker.
//!     actix_web::rt::spawn(async move {
//!         let mut ws = GoingAway::new(shutdown, session, stream);
//!         while let Some(Ok(message)) = ws.next().await {
//!             let sent = match message {
//!                 Message::Text(text) => ws.session().text(text).await,
//!                 _ => Ok(()),
//!             };
//!             if sent.is_err() {
//!                 break;
//!             }
//!         }
//!         ws.close().await;
//!     });
//!     Ok(response)
//! }
//! ```

use std::fmt;
use std::future::poll_fn;
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::{Duration, Instant};

use actix_web::error::PayloadError;
use actix_web::{dev, web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use actix_ws::{CloseCode, CloseReason, Message, MessageStream, ProtocolError, Session};
use futures_util::future::{select, Either};
use futures_util::{FutureExt, Stream, StreamExt};
use lameduck_hyper::websocket::{say_goodbye, GoodbyeIo, Received, SocketTurn};
use lameduck_hyper::{Runtime, ShutdownNotice, UpgradeTicket};
use lameduck_tokio::TokioRuntime;

pub use lameduck_hyper::websocket::{
    error_reason, CloseOutcome, WebSocketShutdown, GOING_AWAY, GOING_AWAY_REASON, INVALID_PAYLOAD,
    MESSAGE_TOO_BIG, PROTOCOL_ERROR,
};

/// actix-ws's handshake ([`actix_ws::handle`]): the `101` response, the session that sends
/// and the stream of the client's messages, whose end is the client's disconnect.
///
/// actix-web reports a connection the client closed as an error of the request's payload
/// (`PayloadError::Incomplete`), and actix-ws passes that error on before the frames that
/// came just ahead of it: a client that sends its Close and closes the connection at once
/// (Go's `golang.org/x/net/websocket` does) would seem to have broken off without one. Here
/// the disconnect ends the payload instead, so the frames before it come through.
///
/// # Errors
///
/// actix-ws's when `req` is not a valid WebSocket handshake (answer with it).
pub fn handle(
    req: &HttpRequest,
    body: web::Payload,
) -> Result<(HttpResponse, Session, MessageStream), actix_web::Error> {
    let ends: actix_http::BoxedPayloadStream = Box::pin(EndAtDisconnect(Some(body.into_inner())));
    let mut payload = dev::Payload::from(ends);
    // The extractor takes the payload as it is: it is ready at once and never fails.
    let body = match web::Payload::from_request(req, &mut payload).now_or_never() {
        Some(Ok(body)) => body,
        _ => {
            return Err(actix_web::error::ErrorInternalServerError(
                "payload unavailable",
            ))
        }
    };
    actix_ws::handle(req, body)
}

/// A request's payload that ends (`None`) where actix-web reports the client's disconnect.
struct EndAtDisconnect(Option<dev::Payload>);

impl Stream for EndAtDisconnect {
    type Item = Result<bytes::Bytes, PayloadError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let Some(payload) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        match payload.poll_next_unpin(cx) {
            Poll::Ready(Some(Err(PayloadError::Incomplete(_)))) | Poll::Ready(None) => {
                self.0 = None;
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

/// The upgrade's place in the drain, from the extensions the [`crate::AdmissionMiddleware`]
/// set on `req` (call it in the handler, before answering `101`, and move it into the task
/// that serves the socket). `None` when the request was not admitted as long-running (no
/// [`ShutdownNotice`]): serve the socket without a goodbye then.
#[must_use]
pub fn shutdown(req: &HttpRequest) -> Option<WebSocketShutdown> {
    let extensions = req.extensions();
    let notice = extensions.get::<ShutdownNotice>()?;
    Some(WebSocketShutdown::from_parts(
        notice,
        extensions.get::<UpgradeTicket>(),
    ))
}

/// How much sooner than on the other adapters a client that never answers is cut on
/// actix-web: actix keeps a connection whose response is over until the client closes it or
/// its client-disconnect timeout passes (1 s by default, on its 500 ms clock), so the cut
/// comes that much earlier for the connection, and the exit, to come within the grace period.
pub const DISCONNECT_LINGER: Duration = Duration::from_secs(1);

/// When a client told goodbye at `now` is cut, given the adapters' `bound`: the bound less
/// [`DISCONNECT_LINGER`], but never less than half of the time to the bound.
fn cut_at(now: Instant, bound: Instant) -> Instant {
    let left = bound.saturating_duration_since(now);
    now + left.saturating_sub(DISCONNECT_LINGER).max(left / 2)
}

/// The Close that answers actix-ws's `error`: [`INVALID_PAYLOAD`] (1007) for a text
/// message that is not UTF-8, [`MESSAGE_TOO_BIG`] (1009) for a frame over the size limit,
/// [`PROTOCOL_ERROR`] (1002) for the rest.
#[must_use]
pub fn error_close(error: &ProtocolError) -> CloseReason {
    let status = match error {
        ProtocolError::Io(io)
            if io.kind() == std::io::ErrorKind::InvalidData
                && io.get_ref().is_some_and(|e| e.is::<std::str::Utf8Error>()) =>
        {
            INVALID_PAYLOAD
        }
        ProtocolError::Overflow => MESSAGE_TOO_BIG,
        _ => PROTOCOL_ERROR,
    };
    CloseReason {
        code: CloseCode::from(status),
        description: Some(error_reason(status).to_owned()),
    }
}

/// Where the socket stands.
#[derive(Debug)]
enum State {
    /// Before its turn.
    Serving,
    /// Its turn came: the goodbye is Close 1001.
    Due,
    /// The client sent Close, with this reason: the goodbye is the answer to it.
    ClientClosed(Option<CloseReason>),
    /// The client's stream ended without a Close, or the session can no longer send.
    Ended,
    /// The client broke the protocol: the server sent its error close ([`error_close`]).
    Failed,
}

/// An actix-ws socket whose [`GoingAway::next`] ends at its turn in the paced drain, and
/// whose [`GoingAway::close`] says goodbye with Close 1001, waiting for the client's Close.
///
/// [`GoingAway::next`] also ends when the client sends Close (the Close is not passed on;
/// `close` answers it), answers pings itself, and ends after passing on a protocol error,
/// which it answers with its error close ([`error_close`]: 1002, 1007 or 1009). Send with
/// [`GoingAway::session`].
/// Serve it from a task of the worker (`actix_web::rt::spawn`): actix-ws's stream is not
/// `Send`.
pub struct GoingAway {
    shutdown: WebSocketShutdown,
    session: Session,
    stream: MessageStream,
    /// The socket's turn, kept across calls of `next` so that a reserved turn is not lost.
    turn: SocketTurn<TokioRuntime>,
    state: State,
}

impl fmt::Debug for GoingAway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoingAway")
            .field("shutdown", &self.shutdown)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// What woke [`GoingAway::next`].
enum Event {
    Turn,
    Message(Option<Result<Message, ProtocolError>>),
}

impl GoingAway {
    /// Wraps the session and stream of [`actix_ws::handle`], whose place in the drain is
    /// `shutdown` ([`shutdown`]).
    #[must_use]
    pub fn new(shutdown: WebSocketShutdown, session: Session, stream: MessageStream) -> Self {
        let turn = SocketTurn::new(TokioRuntime, &shutdown);
        GoingAway {
            shutdown,
            session,
            stream,
            turn,
            state: State::Serving,
        }
    }

    /// The session, to send messages. Do not keep a clone of it past [`GoingAway::close`]:
    /// the connection lasts as long as a session does.
    pub fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The socket's place in the drain.
    #[must_use]
    pub fn shutdown(&self) -> &WebSocketShutdown {
        &self.shutdown
    }

    /// Whether the socket's turn to end has come (seen by [`GoingAway::next`]).
    #[must_use]
    pub fn is_due(&self) -> bool {
        matches!(self.state, State::Due)
    }

    /// The client's next message; `None` once the socket's turn has come, the client sent
    /// Close, or the stream ended: call [`GoingAway::close`] then. Pings are answered with a
    /// pong and not passed on. A protocol error (a malformed frame, an unmasked one, one too
    /// large, text that is not UTF-8) is passed on once, after the server sent its error close
    /// ([`error_close`]); `None` follows.
    ///
    /// Cancel-safe (the turn and the stream are kept in `self`), but for the pong of a ping
    /// being answered.
    pub async fn next(&mut self) -> Option<Result<Message, ProtocolError>> {
        loop {
            if !matches!(self.state, State::Serving) {
                return None;
            }
            let event = poll_fn(|cx| {
                if self.turn.poll_turn(&self.shutdown, cx).is_ready() {
                    return Poll::Ready(Event::Turn);
                }
                self.stream.poll_next_unpin(cx).map(Event::Message)
            })
            .await;
            match event {
                Event::Turn => self.state = State::Due,
                Event::Message(None) => self.state = State::Ended,
                Event::Message(Some(Ok(Message::Close(reason)))) => {
                    self.state = State::ClientClosed(reason);
                }
                Event::Message(Some(Ok(Message::Ping(bytes)))) => {
                    // actix-ws does not answer pings; a pong blocked by a client that does
                    // not read gives way to the turn.
                    let pong = pin!(self.session.pong(&bytes));
                    let turn = pin!(poll_fn(|cx| self.turn.poll_turn(&self.shutdown, cx)));
                    match select(pong, turn).await {
                        Either::Left((Ok(()), _)) => {}
                        Either::Left((Err(_), _)) => self.state = State::Ended,
                        Either::Right(((), _)) => self.state = State::Due,
                    }
                }
                Event::Message(Some(Ok(message))) => return Some(Ok(message)),
                Event::Message(Some(Err(error))) => {
                    // A clone sends the Close; the session itself stays (and with it the
                    // response) until the socket is closed or dropped.
                    let reason = error_close(&error);
                    let _ = self.session.clone().close(Some(reason)).await;
                    self.state = State::Failed;
                    return Some(Err(error));
                }
            }
        }
    }

    /// Says goodbye: sends Close 1001 with [`GOING_AWAY_REASON`], waits for the client's
    /// Close until [`WebSocketShutdown::answer_deadline`] less [`DISCONNECT_LINGER`]
    /// (messages received meanwhile are dropped), then lets the connection go. A client that
    /// closed first gets its answer instead (its own close reason, echoed). Never fails: how
    /// it went is the outcome ([`CloseOutcome::Failed`] after a protocol error or the end of
    /// the client's stream, or when not even the Close could be queued by the bound). A
    /// client cut at the bound is counted
    /// ([`CutKind::WebsocketClose`](lameduck::connection::CutKind::WebsocketClose)), and the
    /// connection's close is noted for the termination summary.
    pub async fn close(self) -> CloseOutcome {
        let GoingAway {
            shutdown,
            session,
            stream,
            turn,
            state,
        } = self;
        drop(turn);
        match state {
            State::Serving | State::Due => {}
            State::ClientClosed(reason) => {
                // The session goes with the Close: the response, and the connection, end.
                return match session.close(reason).await {
                    Ok(()) => CloseOutcome::ClientClosed,
                    Err(_) => CloseOutcome::Failed,
                };
            }
            State::Ended | State::Failed => return CloseOutcome::Failed,
        }
        let now = TokioRuntime.now();
        let deadline = cut_at(now, shutdown.answer_deadline(now));
        // When the socket goes (the last session), the response ends and actix closes the
        // connection.
        let socket = Socket { session, stream };
        say_goodbye(&TokioRuntime, &shutdown, socket, deadline).await
    }
}

/// actix-ws's session and stream, for [`say_goodbye`].
struct Socket {
    /// Kept until the client answered or was cut: the response, so the connection, lasts as
    /// long as a session does.
    session: Session,
    stream: MessageStream,
}

impl GoodbyeIo for Socket {
    async fn send_going_away(&mut self) -> bool {
        let reason = CloseReason {
            code: CloseCode::Away,
            description: Some(GOING_AWAY_REASON.to_owned()),
        };
        // A clone sends the Close (closing it consumes it).
        self.session.clone().close(Some(reason)).await.is_ok()
    }

    async fn next_received(&mut self) -> Option<Received> {
        Some(match self.stream.next().await? {
            Ok(Message::Close(_)) => Received::Close,
            Ok(_) => Received::Other,
            Err(_) => Received::Error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_get_the_close_status_rfc_6455_gives_them() {
        let bytes = vec![b'a', 0xff];
        let not_utf8 = std::str::from_utf8(&bytes).unwrap_err();
        let text = ProtocolError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            not_utf8,
        ));
        assert_eq!(error_close(&text).code, CloseCode::Invalid);
        assert_eq!(error_close(&ProtocolError::Overflow).code, CloseCode::Size);
        let garbage = ProtocolError::InvalidOpcode(3);
        assert_eq!(error_close(&garbage).code, CloseCode::Protocol);
        let reset = ProtocolError::Io(std::io::ErrorKind::ConnectionReset.into());
        assert_eq!(error_close(&reset).code, CloseCode::Protocol);
        assert_eq!(u16::from(error_close(&text).code), INVALID_PAYLOAD);
    }

    #[test]
    fn the_cut_comes_the_linger_sooner_but_leaves_half_the_time() {
        let now = Instant::now();
        let s = Duration::from_millis;
        assert_eq!(cut_at(now, now + s(9_800)), now + s(8_800));
        assert_eq!(cut_at(now, now + s(1_000)), now + s(500));
        assert_eq!(cut_at(now, now), now);
    }
}
