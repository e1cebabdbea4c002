//! A socket's place in the drain ([`WebSocketShutdown`]), the close statuses and reasons, the
//! bounds on a goodbye, and how one went ([`CloseOutcome`]).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Request;
use lameduck::Shared;

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
/// ([`MessageKind::error_status`](crate::websocket::MessageKind::error_status)).
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
    pub(crate) fn reserve_turn(&self, now: Instant) -> Option<Instant> {
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

/// How a socket's goodbye went ([`GoingAway::close`](crate::websocket::GoingAway::close),
/// [`say_goodbye`](crate::websocket::say_goodbye)).
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
