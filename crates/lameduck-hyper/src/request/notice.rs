//! What a long-running handler is told of the shutdown: when to end its stream, and, in the
//! paced long-running drain, when its own turn to end comes.

use std::fmt;
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

use lameduck::gate::Rejection;
use lameduck::{LifecycleSignal, LifecycleSignalFired, Shared};

use crate::request::ticket::LongRunningTicketHolder;

/// Handed to long-running handlers as a request extension: resolves when the server stops
/// accepting new requests (`NotAcceptingNewRequest`), the moment to end the stream cleanly.
///
/// A stream may end at once then: its response body's end is held until its turn in the
/// paced long-running drain. A handler that rather keeps serving until its turn, and says
/// goodbye then (a WebSocket Close frame, an event stream's `retry:` hint), asks for the turn
/// with [`ShutdownNotice::reserve_turn`].
///
/// ```
/// # use lameduck_hyper::ShutdownNotice;
/// async fn stream_until_shutdown<B>(req: http::Request<B>) {
///     if let Some(notice) = req.extensions().get::<ShutdownNotice>().cloned() {
///         // Produce events until the server stops accepting, then end the stream.
///         notice.wait().await;
///     }
/// }
/// ```
#[derive(Clone)]
pub struct ShutdownNotice {
    shared: Arc<Shared>,
    /// What holds the request's ticket and its turn in the paced drain (`None`: no turn, end
    /// at once). Weak: a notice kept anywhere never keeps the request counted once its body
    /// has ended.
    holder: Option<Weak<LongRunningTicketHolder>>,
}

impl fmt::Debug for ShutdownNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownNotice")
            .field("fired", &self.is_fired())
            .finish()
    }
}

impl ShutdownNotice {
    /// A notice of `shared`'s lifecycle, for a request with no turn in the paced drain
    /// ([`ShutdownNotice::reserve_turn`] says "at once").
    #[must_use]
    pub fn new(shared: Arc<Shared>) -> Self {
        ShutdownNotice {
            shared,
            holder: None,
        }
    }

    /// A notice for the long-running request whose ticket `holder` holds.
    pub(crate) fn with_turn(shared: Arc<Shared>, holder: &Arc<LongRunningTicketHolder>) -> Self {
        ShutdownNotice {
            shared,
            holder: Some(Arc::downgrade(holder)),
        }
    }

    /// The lifecycle's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Resolves once the stream should end.
    pub fn wait(&self) -> LifecycleSignalFired {
        self.shared
            .signal_fired(LifecycleSignal::NotAcceptingNewRequest)
    }

    /// Whether the stream should end now.
    #[must_use]
    pub fn is_fired(&self) -> bool {
        self.shared
            .has_fired(LifecycleSignal::NotAcceptingNewRequest)
    }

    /// Once the notice has fired: this stream's turn to end in the paced long-running drain,
    /// reserved on the first call (`now` on the runtime's clock). `None` means at once: the
    /// notice has not fired yet, the drain is not paced (no grace period), its deadline has
    /// passed, or the request has no place in it (served after the gate closed, or an
    /// upgrade whose ticket the handler took). The response body's end keeps the same turn,
    /// so a handler that ends its stream at the turn is not held again.
    #[must_use]
    pub fn reserve_turn(&self, now: Instant) -> Option<Instant> {
        if !self.is_fired() {
            return None;
        }
        self.holder
            .as_ref()
            .and_then(Weak::upgrade)
            .and_then(|holder| holder.reserve_turn(now))
    }

    /// The `Retry-After` a request turned away now would get (1 s in close-listener mode, 5 s
    /// in retry-after mode): what a stream ended at shutdown tells its client to wait before
    /// it comes back (an event stream's `retry:`).
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        Rejection::for_mode(self.shared.config().mode()).retry_after()
    }
}

impl LongRunningTicketHolder {
    /// See [`ShutdownNotice::reserve_turn`]: reserves the turn once, then gives the same
    /// answer. An answer "at once" before the gate closed (a stream that ended while the
    /// server served, the `101` of an upgrade) is not kept: the turn is still to come.
    pub(crate) fn reserve_turn(&self, now: Instant) -> Option<Instant> {
        let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = *turn {
            return kept;
        }
        let clock = self.clock;
        let ticket = self.ticket.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = ticket.as_ref()?;
        let at = ticket
            .reserve_turn(clock.instant(now))
            .map(|at| clock.to_std(at));
        if at.is_some() || ticket.holder().gate().is_closed() {
            *turn = Some(at);
        }
        at
    }
}
