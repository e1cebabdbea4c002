//! What keeps an admitted request counted in the gate until its response body ends: a
//! normal ticket, or a long-running one that an upgrade handler may take over. Shared by the
//! admission decision, which issues them, and the response bodies, which hold them.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use http::Request;
use lameduck::shared::{OwnedLongRunningTicket, OwnedNormalTicket};
use lameduck::{Shared, StdClock};

/// Holds a long-running request's ticket, which an upgrade handler can take over (see
/// [`take_upgrade_ticket`]), with the clock that dates the end of its body and its turn to
/// end in the paced drain. Shared (`Arc`) by the request's tracker, its shutdown notice and,
/// for an upgrade, its [`UpgradeTicket`].
pub(crate) struct LongRunningTicketHolder {
    pub(crate) ticket: Mutex<Option<OwnedLongRunningTicket>>,
    pub(crate) clock: StdClock,
    /// The trailers that end the body (a gRPC stream's status), held until its paced turn.
    pub(crate) trailers: Mutex<Option<http::HeaderMap>>,
    /// The turn reserved in the paced drain, once asked after the gate closed (`Some(None)`:
    /// at once).
    pub(crate) turn: Mutex<Option<Option<Instant>>>,
}

impl fmt::Debug for LongRunningTicketHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LongRunningTicketHolder")
    }
}

impl LongRunningTicketHolder {
    /// A holder of `ticket`, ended on `clock`.
    pub(crate) fn new(ticket: OwnedLongRunningTicket, clock: StdClock) -> Arc<Self> {
        Arc::new(LongRunningTicketHolder {
            ticket: Mutex::new(Some(ticket)),
            clock,
            trailers: Mutex::new(None),
            turn: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OwnedLongRunningTicket>> {
        self.ticket.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What keeps a request counted in the gate until its body ends.
#[derive(Debug)]
pub(crate) enum Tracker {
    /// Held for its `Drop`, which releases the request.
    Normal(#[allow(dead_code)] OwnedNormalTicket),
    LongRunning(Arc<LongRunningTicketHolder>),
    /// Served after the gate closed ([`lameduck::Admission::Late`]): nothing to release,
    /// but bounded by the request timeout like a normal request.
    Late(Arc<Shared>),
}

/// Keeps one admitted request counted in the gate until dropped; hold it until the response
/// body ends.
#[derive(Debug)]
pub struct RequestTracker(pub(crate) Tracker);

impl RequestTracker {
    /// Called when the response body has ended at `now` (the runtime's clock): the instant
    /// until which a long-running body's end must be held (its paced turn in the drain), or
    /// `None` to end at once.
    #[must_use]
    pub fn hold_until(&self, now: Instant) -> Option<Instant> {
        match &self.0 {
            Tracker::Normal(_) | Tracker::Late(_) => None,
            Tracker::LongRunning(holder) => holder.reserve_turn(now),
        }
    }

    /// The lifecycle's shared state, through the ticket (`None` once an upgrade handler took
    /// the long-running ticket).
    pub(crate) fn shared(&self) -> Option<Arc<Shared>> {
        match &self.0 {
            Tracker::Normal(ticket) => Some(Arc::clone(ticket.holder())),
            Tracker::LongRunning(holder) => holder.lock().as_ref().map(|t| Arc::clone(t.holder())),
            Tracker::Late(shared) => Some(Arc::clone(shared)),
        }
    }

    /// The request timeout that bounds this request: a normal request's (`None` when the
    /// configured timeout is zero), never a long-running one's.
    pub(crate) fn request_timeout(&self) -> Option<std::time::Duration> {
        match &self.0 {
            Tracker::Normal(ticket) => request_timeout(ticket.holder()),
            Tracker::LongRunning(_) => None,
            Tracker::Late(shared) => request_timeout(shared),
        }
    }

    /// Keeps `trailers` (a long-running body's last frame) until [`Self::take_trailers`];
    /// gives them back for a normal request's tracker.
    pub(crate) fn hold_trailers(&self, trailers: http::HeaderMap) -> Option<http::HeaderMap> {
        match &self.0 {
            Tracker::Normal(_) | Tracker::Late(_) => Some(trailers),
            Tracker::LongRunning(holder) => {
                *holder
                    .trailers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(trailers);
                None
            }
        }
    }

    /// The trailers [`Self::hold_trailers`] kept, if any.
    pub(crate) fn take_trailers(&self) -> Option<http::HeaderMap> {
        match &self.0 {
            Tracker::Normal(_) | Tracker::Late(_) => None,
            Tracker::LongRunning(holder) => holder
                .trailers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        }
    }

    /// Counts this request as turned away by the request timeout (answered 504, or its
    /// response aborted): call it once, when the deadline fires, before releasing the
    /// request. Only normal requests have a timeout; for others it does nothing.
    #[cold]
    pub fn count_timeout(&self) {
        let shared = match &self.0 {
            Tracker::Normal(ticket) => ticket.holder(),
            Tracker::Late(shared) => shared,
            Tracker::LongRunning(_) => return,
        };
        shared
            .counters()
            .count_rejection(lameduck::rejections::RejectionReason::RequestTimeout);
    }

    /// The tracker of a request served after the gate closed: untracked in the gate, bounded
    /// by the request timeout.
    pub(crate) fn late(shared: &Arc<Shared>) -> Self {
        RequestTracker(Tracker::Late(Arc::clone(shared)))
    }

    /// Whether this is a normal (or tracked exempt) request's tracker, admitted before the
    /// gate closed.
    #[inline]
    pub(crate) fn is_normal(&self) -> bool {
        matches!(self.0, Tracker::Normal(_))
    }

    /// Whether this is a long-running request's tracker (its end may be held).
    pub(crate) fn is_long_running(&self) -> bool {
        matches!(self.0, Tracker::LongRunning(_))
    }
}

/// The long-running ticket of an upgrade request (WebSocket), as a request extension: what
/// [`take_upgrade_ticket`] takes.
///
/// An upgraded connection outlives its `101` response, so the layer cannot see when it
/// ends. Call [`take_upgrade_ticket`] in the handler and keep the ticket in the task that
/// serves the upgraded connection: the drain waits for it until it is dropped.
#[derive(Clone)]
pub struct UpgradeTicket(pub(crate) Arc<LongRunningTicketHolder>);

impl fmt::Debug for UpgradeTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UpgradeTicket")
    }
}

/// Takes the long-running ticket of an upgrade request, so the upgraded connection stays
/// counted (and the drain waits for it) until the ticket is dropped. The one call a
/// WebSocket handler makes. Returns `None` for requests that carry no ticket.
pub fn take_upgrade_ticket<B>(req: &Request<B>) -> Option<OwnedLongRunningTicket> {
    let upgrade = req.extensions().get::<UpgradeTicket>()?;
    upgrade.0.lock().take()
}

/// The request timeout the layer applies to normal requests, if any (`None` when the
/// configured timeout is zero).
#[must_use]
pub fn request_timeout(shared: &Shared) -> Option<std::time::Duration> {
    let t = shared.config().request_timeout();
    (!t.is_zero()).then_some(t)
}
