//! What the lifecycle counts, apart from what it decides: the requests turned away, the
//! requests served after the gate closed, the arrivals a load balancer sent during a
//! termination (and whether they are being watched), the WebSocket goodbyes, the connections
//! cut at their bound and the last close.
//!
//! [`Shared`] decides (admission, health, signals, phase, connection bounds, idle-close,
//! keep-alive); [`Shared::counters`] gives the view that counts and reads the counts back.
//! The counters themselves stay in [`Shared`], next to the state they follow: this is a
//! view, not a copy. The termination summary and the metrics read their figures here.

use core::fmt;

pub use super::arrivals::{ArrivalCounts, RequestArrival};
pub use super::goodbyes::GoodbyeCounts;
pub use super::peers::PeerCounts;
use super::Shared;
use crate::connection::CutKind;
use crate::rejections::{RejectionCounts, RejectionReason};
use crate::signal::LifecycleSignal;
use crate::sync::Ordering;
use crate::time::Instant;

/// What the lifecycle counts: a view of [`Shared`], from [`Shared::counters`]. `Copy`, one
/// reference wide: take it where it is needed.
///
/// ```
/// use lameduck::rejections::RejectionReason;
/// use lameduck::{Config, Lifecycle};
///
/// let prepared = Lifecycle::new(Config::default()).prepare();
/// let counters = prepared.shared().counters();
/// counters.count_rejection(RejectionReason::RequestTimeout);
/// assert_eq!(counters.rejections().get(RejectionReason::RequestTimeout), 1);
/// ```
#[derive(Clone, Copy)]
pub struct Counters<'a> {
    shared: &'a Shared,
}

impl fmt::Debug for Counters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counters")
            .field("rejections", &self.rejections())
            .field("served_after_close", &self.served_after_close())
            .field("arrivals", &self.arrivals())
            .field("goodbyes", &self.goodbyes())
            .field("peers", &self.peer_counts())
            .finish()
    }
}

impl Shared {
    /// What the lifecycle counts (see [`Counters`]); everything else here is what it decides.
    #[must_use]
    #[inline]
    pub fn counters(&self) -> Counters<'_> {
        Counters { shared: self }
    }
}

impl Counters<'_> {
    /// Counts a request the adapter turned away for `reason` (a 504 or an aborted response at
    /// the request timeout, an unknown path before the routes are ready);
    /// [`Shared::admit`] counts closed-gate rejections itself. Call it on the rejection path
    /// only.
    #[cold]
    pub fn count_rejection(self, reason: RejectionReason) {
        self.shared.rejections.count(reason);
    }

    /// The requests turned away so far, by reason.
    #[must_use]
    pub fn rejections(self) -> RejectionCounts {
        self.shared.rejections.snapshot()
    }

    /// The requests served after the gate closed
    /// ([`Admission::Late`](crate::Admission::Late)).
    #[must_use]
    pub fn served_after_close(self) -> u64 {
        self.shared.served_after_close.load(Ordering::Relaxed)
    }

    /// Whether the adapters should report arrivals ([`Counters::note_connection`],
    /// [`Counters::note_request`]) now: from the first "not ready" answer of `/readyz` until
    /// `HasBeenReady`, and from `ShutdownInitiated` until `HTTPServerStoppedListening`. One
    /// relaxed load: ask it for every connection and request, and read the clock only when it
    /// says so.
    #[must_use]
    #[inline]
    pub fn watching_arrivals(self) -> bool {
        self.shared.arrivals.watching()
    }

    /// Notes a connection accepted at `at` (ask [`Counters::watching_arrivals`] when it is
    /// accepted): if that was during a termination, how long after the signal it came, and
    /// whether it was late. Adapters report a connection with its first request other than
    /// health and metrics, so that a balancer's health checks do not count.
    pub fn note_connection(self, at: Instant) {
        let shared = self.shared;
        let Some(initiated) = shared.fired_at(LifecycleSignal::ShutdownInitiated) else {
            return;
        };
        if at < initiated {
            return;
        }
        let since = at.saturating_duration_since(initiated);
        match shared.fired_at(LifecycleSignal::NotAcceptingNewRequest) {
            // Accepted after the shutdown delay (retry-after mode): turned away.
            Some(not_accepting) if at >= not_accepting => shared.arrivals.late_connection(),
            _ => shared
                .arrivals
                .connection(since, since >= shared.config.late_arrivals_from()),
        }
    }

    /// Notes a request (health and metrics aside) that arrived at `now` (ask
    /// [`Counters::watching_arrivals`] first). Requests after the shutdown delay are not noted
    /// here: admission counts those it turns away as late.
    pub fn note_request(self, now: Instant) -> RequestArrival {
        let shared = self.shared;
        if shared.arrivals.not_ready_probed() && !shared.has_fired(LifecycleSignal::HasBeenReady) {
            return shared.arrivals.before_ready();
        }
        if shared.arrivals.terminating()
            && !shared.has_fired(LifecycleSignal::NotAcceptingNewRequest)
        {
            if let Some((offset, late)) = self.termination_offset(now) {
                shared.arrivals.request(offset, late);
            }
        }
        RequestArrival::Noted
    }

    /// What the server saw of new connections and requests so far: late arrivals during the
    /// termination and traffic before ready (see [`ArrivalCounts`]).
    #[must_use]
    pub fn arrivals(self) -> ArrivalCounts {
        self.shared.arrivals.counts()
    }

    /// How long after `ShutdownInitiated` `now` is, and whether an arrival then is late: in
    /// the last [`Config::late_arrival_percent`](crate::Config::late_arrival_percent) of the
    /// shutdown delay, or after it.
    fn termination_offset(self, now: Instant) -> Option<(core::time::Duration, bool)> {
        let shared = self.shared;
        let initiated = shared.fired_at(LifecycleSignal::ShutdownInitiated)?;
        let since = now.saturating_duration_since(initiated);
        let late = shared.has_fired(LifecycleSignal::NotAcceptingNewRequest)
            || since >= shared.config.late_arrivals_from();
        Some((since, late))
    }

    /// Counts a WebSocket Close (1001, Going Away) sent to a client at its stream's turn.
    /// Called by the WebSocket helpers of the adapters, once per connection.
    pub fn count_websocket_close_sent(self) {
        self.shared.goodbyes.sent();
    }

    /// Counts a client's answering Close to one counted by
    /// [`Counters::count_websocket_close_sent`], received within the bound.
    pub fn count_websocket_close_answered(self) {
        self.shared.goodbyes.answered();
    }

    /// The WebSocket Close frames sent at shutdown, and how many went unanswered.
    #[must_use]
    pub fn goodbyes(self) -> GoodbyeCounts {
        self.shared.goodbyes.counts()
    }

    /// Counts a connection the adapter closed at its bound
    /// ([`Shared::connection_bound`]) with its peer silent, as `kind`. Call it on that path
    /// only.
    #[cold]
    pub fn count_connection_cut(self, kind: CutKind) {
        let in_termination = self.shared.has_fired(LifecycleSignal::ShutdownInitiated);
        self.shared.peers.cut(kind, in_termination);
    }

    /// Notes that a connection closed at `now` (any connection, however it ended): after
    /// `ShutdownInitiated`, the latest such close is the summary's `last_connection_closed`.
    /// Before it, nothing is noted; adapters may ask [`Shared::has_fired`] first to skip
    /// reading the clock.
    pub fn note_connection_closed(self, now: Instant) {
        let Some(initiated) = self.shared.fired_at(LifecycleSignal::ShutdownInitiated) else {
            return;
        };
        self.shared
            .peers
            .closed(now.saturating_duration_since(initiated));
    }

    /// The connections cut at their bound, by kind, and when the last connection closed.
    #[must_use]
    pub fn peer_counts(self) -> PeerCounts {
        self.shared.peers.counts()
    }
}
