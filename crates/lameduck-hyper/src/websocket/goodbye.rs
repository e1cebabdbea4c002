//! The goodbye without its I/O, the same on every adapter: a socket's turn, polled
//! ([`SocketTurn`]), and the Close 1001 sent, the client's answer awaited until a deadline,
//! counted and cut ([`say_goodbye`]) over what an adapter's socket does ([`GoodbyeIo`]).

use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::future::{select, Either};
use lameduck::connection::CutKind;
use lameduck::LifecycleSignalFired;

use crate::runtime::Runtime;
use crate::websocket::shutdown::{CloseOutcome, WebSocketShutdown};

/// Where a socket's turn stands.
enum TurnState<S> {
    /// Before the notice.
    Serving(Pin<Box<LifecycleSignalFired>>),
    /// After it, until the reserved turn.
    Waiting(Pin<Box<S>>),
    /// The turn came.
    Due,
}

/// A socket's turn to end, polled: ready once the server stops accepting and the turn
/// reserved for the socket in the paced drain has come (at once when there is none). It is
/// kept across polls, so that a turn once reserved is not lost; every adapter's socket
/// wrapper polls one beside the client's messages.
pub struct SocketTurn<R: Runtime> {
    runtime: R,
    state: TurnState<R::Sleep>,
}

impl<R: Runtime> fmt::Debug for SocketTurn<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocketTurn")
            .field("due", &self.is_due())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> SocketTurn<R> {
    /// The turn of the socket whose place in the drain is `shutdown`, on `runtime`'s clock.
    pub fn new(runtime: R, shutdown: &WebSocketShutdown) -> Self {
        SocketTurn {
            runtime,
            state: TurnState::Serving(Box::pin(shutdown.notice().wait())),
        }
    }

    /// Whether the turn has come (seen by a poll).
    #[must_use]
    pub fn is_due(&self) -> bool {
        matches!(self.state, TurnState::Due)
    }

    /// Ready at the turn of the socket whose place is `shutdown` (the one it was made with).
    pub fn poll_turn(&mut self, shutdown: &WebSocketShutdown, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.state {
                TurnState::Serving(fired) => {
                    if fired.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.state = match shutdown.reserve_turn(self.runtime.now()) {
                        Some(at) => TurnState::Waiting(Box::pin(self.runtime.sleep_until(at))),
                        None => TurnState::Due,
                    };
                }
                TurnState::Waiting(sleep) => {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.state = TurnState::Due;
                }
                TurnState::Due => return Poll::Ready(()),
            }
        }
    }
}

/// What a client sent while the server waits for its answer to the Close, as the goodbye
/// sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Received {
    /// The client's Close: the answer.
    Close,
    /// Any other message (sent before the client saw the Close): dropped.
    Other,
    /// An error of the socket: the goodbye failed.
    Error,
}

/// A socket's side of the goodbye ([`say_goodbye`]): how an adapter's socket sends the
/// server's Close and reads what the client sends back. The rest (counting, the bound, the
/// outcome) is the same on every adapter.
pub trait GoodbyeIo {
    /// Sends (or queues, for a socket written from elsewhere) Close
    /// [`GOING_AWAY`](crate::websocket::GOING_AWAY) with
    /// [`GOING_AWAY_REASON`](crate::websocket::GOING_AWAY_REASON); `false` when it could not.
    fn send_going_away(&mut self) -> impl Future<Output = bool>;
    /// The client's next message (`None`: its stream ended).
    fn next_received(&mut self) -> impl Future<Output = Option<Received>>;
}

/// The goodbye at a socket's turn, written once for every adapter: sends Close 1001 on
/// `socket`, waits for the client's Close until `deadline` (what else it sends meanwhile is
/// dropped), then drops the socket (which lets the connection go) and notes the connection's
/// close for the termination summary. The Close sent and its answer are counted, and so is a
/// client cut at `deadline` ([`CutKind::WebsocketClose`]): [`CloseOutcome::Cut`], or
/// [`CloseOutcome::Failed`] when not even the Close could be sent by then. An error or the
/// end of the client's stream before its Close is [`CloseOutcome::Failed`].
pub async fn say_goodbye<R, S>(
    runtime: &R,
    shutdown: &WebSocketShutdown,
    mut socket: S,
    deadline: Instant,
) -> CloseOutcome
where
    R: Runtime,
    S: GoodbyeIo,
{
    let shared = shutdown.shared();
    let sent = AtomicBool::new(false);
    let goodbye = async {
        if !socket.send_going_away().await {
            return CloseOutcome::Failed;
        }
        sent.store(true, Ordering::Relaxed);
        shared.counters().count_websocket_close_sent();
        // Messages the client sent before it saw the Close are dropped.
        while let Some(received) = socket.next_received().await {
            match received {
                Received::Close => {
                    shared.counters().count_websocket_close_answered();
                    return CloseOutcome::Answered;
                }
                Received::Other => {}
                Received::Error => return CloseOutcome::Failed,
            }
        }
        CloseOutcome::Failed
    };
    let cut = runtime.sleep_until(deadline);
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
    // The socket goes: the connection ends.
    drop(socket);
    shutdown.note_closed(runtime);
    outcome
}
