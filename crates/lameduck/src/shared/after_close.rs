//! What a request that finds the gate closed gets, by the connection it came on, and when a
//! connection that may be about to carry a request (or, with the idle-close spread, any idle
//! one) is ended at the stop.

use alloc::sync::Arc;

use super::{Admission, Shared};
use crate::classify::RequestClass;
use crate::config::ShutdownMode;
use crate::connection::{ConnectionKind, IDLE_CONNECTION_LINGER};
use crate::gate::{LongRunningTicketOf, NormalTicketOf, Rejection};
use crate::signal::LifecycleSignal;
use crate::sync::Ordering;
use crate::time::Instant;

impl Shared {
    /// Admits a request of `class` that came on a connection of `kind`.
    ///
    /// While the gate is open, as [`Shared::admit`]. Once it has closed, a request that
    /// reaches the server on a connection opened before is new work only where a client can
    /// take the answer elsewhere; otherwise refusing it would fail a request the client had
    /// every reason to send. So, after the close, a request is served
    /// ([`Admission::Late`]) when it came
    /// - on an HTTP/2 connection ended with the two-step GOAWAY, in close-listener mode: it
    ///   arrived before the final GOAWAY, which tells the client it was processed;
    /// - on any connection the adapter serves, when the listening sockets outlive this
    ///   process ([`Shared::set_sockets_outlive`]): its client is kept alive and its next
    ///   connection goes to the process that keeps the sockets.
    ///
    /// Every other request after the close gets the mode's rejection: kube-apiserver's 503
    /// `Retry-After: 1` (close-listener mode, HTTP/1 behind a balancer) or 429
    /// `Retry-After: 5` (retry-after mode), both with `Connection: close`, so that the client
    /// retries on a new connection, which the balancer sends elsewhere.
    #[inline]
    pub fn admit_on(self: &Arc<Self>, class: RequestClass, kind: ConnectionKind) -> Admission {
        match class {
            RequestClass::Exempt => Admission::Exempt(NormalTicketOf::admit(self).ok()),
            RequestClass::Normal => match NormalTicketOf::admit(self) {
                Ok(t) => Admission::Normal(t),
                Err(r) => self.after_close(class, r, kind),
            },
            RequestClass::LongRunning => match LongRunningTicketOf::admit(self) {
                Ok(t) => Admission::LongRunning(t),
                Err(r) => self.after_close(class, r, kind),
            },
        }
    }

    /// Whether a request that found the gate closed with `rejection` on a connection of
    /// `kind` is served anyway (see [`Shared::admit_on`]).
    #[must_use]
    pub fn serves_after_close(&self, rejection: Rejection, kind: ConnectionKind) -> bool {
        match kind {
            ConnectionKind::Unknown => false,
            ConnectionKind::Http1 => self.sockets_outlive(),
            ConnectionKind::Http2 => rejection == Rejection::NotAccepting || self.sockets_outlive(),
        }
    }

    /// A closed gate's answer: served late, or the rejection, counted.
    #[cold]
    #[inline(never)]
    fn after_close(
        &self,
        class: RequestClass,
        rejection: Rejection,
        kind: ConnectionKind,
    ) -> Admission {
        if self.serves_after_close(rejection, kind) {
            self.served_after_close.fetch_add(1, Ordering::Relaxed);
            return Admission::Late(class);
        }
        self.rejections.count(rejection.into());
        // Turned away after the shutdown delay: a late arrival.
        self.arrivals.late_rejection();
        Admission::Rejected(rejection)
    }

    /// When an adapter stopping at `now` closes a connection that waits for a request:
    /// `first` when none has come on it yet. Closing an idle connection races a request
    /// its client may be sending, which then fails without an answer; so:
    /// - a connection that has carried no request yet was just opened by a client about to
    ///   send one: it is kept until `now` + [`IDLE_CONNECTION_LINGER`];
    /// - when the sockets outlive this process, a keep-alive connection is kept until
    ///   [`IDLE_CONNECTION_LINGER`] after [`LifecycleSignal::ShutdownInitiated`] (so at once when the
    ///   shutdown delay was at least that long: its client had the time to move), idle or
    ///   busy with a response admitted before the signal, which goes out without
    ///   `Connection: close`;
    /// - otherwise it is closed at `now`, as Go's `Server.Shutdown` does.
    ///
    /// A request that arrives meanwhile is answered ([`Shared::admit_on`]) and the connection
    /// closed after it.
    #[must_use]
    pub fn idle_close_at(&self, first: bool, now: Instant) -> Instant {
        if first {
            return now + IDLE_CONNECTION_LINGER;
        }
        match self.fired_at(LifecycleSignal::ShutdownInitiated) {
            Some(at) if self.sockets_outlive() => core::cmp::max(now, at + IDLE_CONNECTION_LINGER),
            _ => now,
        }
    }

    /// When an adapter stopping at `now` ends a connection (closes it, or says GOAWAY), with
    /// the [idle-close spread](crate::Config::idle_close_spread) drawn from `sample`, a
    /// uniformly random `u32` of the connection's own. `waits` is [`Shared::idle_close_at`]'s
    /// `first` for a connection that waits for a request, `None` for one that would end at
    /// once without the spread (an HTTP/2 connection that has carried a stream).
    /// `window_start` is when the adapter told its connections to end (at the latest `now`;
    /// [`Shared::idle_close_window_start`] when it does so at the lifecycle's stop).
    ///
    /// Without the spread this is [`Shared::idle_close_at`] (or `now`). With it, the
    /// connection's point in the window, `window_start + idle_close_delay(sample)`, or the
    /// time above if that is later: never in the past, and never sooner than a connection
    /// that waits for a request would be closed without the spread. (An HTTP/1 connection
    /// busy with a request at the stop is not spread: it ends after its response, as without
    /// the spread.)
    #[must_use]
    pub fn spread_close_at(
        &self,
        waits: Option<bool>,
        window_start: Instant,
        now: Instant,
        sample: u32,
    ) -> Instant {
        let unspread = waits.map_or(now, |first| self.idle_close_at(first, now));
        let config = self.config();
        if config.idle_close_spread().is_zero() {
            return unspread;
        }
        core::cmp::max(unspread, window_start + config.idle_close_delay(sample))
    }

    /// When the server stopped listening, the start of the idle-close window of an adapter
    /// that tells its connections to end at the lifecycle's stop: the mode's signal
    /// (`NotAcceptingNewRequest` in close-listener mode, `InFlightRequestsDrained` in
    /// retry-after mode), or `now` if it has not fired. Measured from it, the window is the
    /// same for every connection, however late each sees the stop.
    #[must_use]
    pub fn idle_close_window_start(&self, now: Instant) -> Instant {
        let stop = match self.config().mode() {
            ShutdownMode::CloseListener => LifecycleSignal::NotAcceptingNewRequest,
            ShutdownMode::SendRetryAfter => LifecycleSignal::InFlightRequestsDrained,
        };
        self.fired_at(stop)
            .map_or(now, |at| core::cmp::min(at, now))
    }
}
