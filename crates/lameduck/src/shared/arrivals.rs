//! What the server sees of its load balancer: when new connections and requests arrived
//! during a termination, which of them were late, and the requests that came while the
//! readiness probe said "not ready".
//!
//! A balancer that honours the readiness probe stops opening connections to a server soon
//! after `/readyz` turns red at [`LifecycleSignal::ShutdownInitiated`], well within the
//! shutdown delay. A connection that still arrives in the last part of the delay
//! ([`Config::late_arrival_percent`], 20 % by default) is *late*: the delay barely covered the
//! balancer, and a slower one would have found the listener closed (close-listener mode) or
//! been answered 429 (retry-after mode). So is a connection accepted, or a request turned
//! away, after the delay. Requests on connections opened before the signal are counted too,
//! but they are not the balancer's decision (an HTTP/2 client keeps its connection until
//! GOAWAY), so only late connections call for a warning.
//!
//! The readiness probes are watched too: the time between the last two `/readyz` requests
//! before the signal (the balancer's probe period, as the server sees it) and how many
//! `/readyz` answered "not ready" after it. A balancer that kept sending after several failed
//! probes needs more of them to give up; the planner turns that into a delay
//! ([`plan::observed`](crate::plan)).
//!
//! The core reads no clock: the adapters pass the instant of each arrival, and they ask only
//! while [`Counters::watching_arrivals`] says so (one relaxed load per request and
//! connection), from the moment `/readyz` first answered "not ready" until `HasBeenReady`,
//! and from `ShutdownInitiated` until `HTTPServerStoppedListening`.
//!
//! [`Counters::watching_arrivals`]: super::counters::Counters::watching_arrivals
//! [`Config::late_arrival_percent`]: crate::Config::late_arrival_percent

use core::time::Duration;

use crate::signal::LifecycleSignal;
use crate::sync::{AtomicU64, AtomicU8, Ordering};
use crate::time::Instant;

/// A bit of `Arrivals::watch`: `/readyz` answered "not ready" before `HasBeenReady`.
const NOT_READY_PROBED: u8 = 1;
/// A bit of `Arrivals::watch`: from `ShutdownInitiated` to `HTTPServerStoppedListening`.
const TERMINATING: u8 = 2;

/// `Arrivals::last_*` before any arrival: the offsets are stored plus one nanosecond.
const NONE: u64 = 0;

/// The counters behind [`ArrivalCounts`], in [`Shared`].
#[derive(Debug)]
pub(crate) struct Arrivals {
    watch: AtomicU8,
    /// Nanoseconds from `ShutdownInitiated` to the latest new connection, plus one.
    last_connection: AtomicU64,
    /// Nanoseconds from `ShutdownInitiated` to the latest new request, plus one.
    last_request: AtomicU64,
    late_connections: AtomicU64,
    late_requests: AtomicU64,
    before_ready: AtomicU64,
    /// The instant of the latest `/readyz` request before `ShutdownInitiated`, in
    /// nanoseconds plus one.
    last_probe: AtomicU64,
    /// Nanoseconds between the last two `/readyz` requests before `ShutdownInitiated`, plus
    /// one.
    probe_interval: AtomicU64,
    /// `/readyz` answered "not ready" from `ShutdownInitiated` on.
    failed_probes: AtomicU64,
}

impl Arrivals {
    pub(crate) fn new() -> Self {
        Arrivals {
            watch: AtomicU8::new(0),
            last_connection: AtomicU64::new(NONE),
            last_request: AtomicU64::new(NONE),
            late_connections: AtomicU64::new(0),
            late_requests: AtomicU64::new(0),
            before_ready: AtomicU64::new(0),
            last_probe: AtomicU64::new(NONE),
            probe_interval: AtomicU64::new(NONE),
            failed_probes: AtomicU64::new(0),
        }
    }
}

impl Arrivals {
    /// See [`Counters::watching_arrivals`](super::counters::Counters::watching_arrivals).
    #[inline]
    pub(crate) fn watching(&self) -> bool {
        self.watch.load(Ordering::Relaxed) != 0
    }

    /// From `ShutdownInitiated` to `HTTPServerStoppedListening`.
    pub(crate) fn terminating(&self) -> bool {
        self.watch.load(Ordering::Acquire) & TERMINATING != 0
    }

    /// `/readyz` has answered "not ready", and `HasBeenReady` has not cleared it since.
    pub(crate) fn not_ready_probed(&self) -> bool {
        self.watch.load(Ordering::Acquire) & NOT_READY_PROBED != 0
    }

    /// A connection `offset` after `ShutdownInitiated` (late or not).
    pub(crate) fn connection(&self, offset: Duration, late: bool) {
        self.last_connection
            .fetch_max(stored(offset), Ordering::AcqRel);
        if late {
            self.late_connections.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A connection accepted after the shutdown delay (its requests are turned away).
    pub(crate) fn late_connection(&self) {
        self.late_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A request `offset` after `ShutdownInitiated` (late or not).
    pub(crate) fn request(&self, offset: Duration, late: bool) {
        self.last_request
            .fetch_max(stored(offset), Ordering::AcqRel);
        if late {
            self.late_requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request turned away after the shutdown delay.
    pub(crate) fn late_rejection(&self) {
        self.late_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A request while the readiness probe says "not ready".
    pub(crate) fn before_ready(&self) -> RequestArrival {
        if self.before_ready.fetch_add(1, Ordering::Relaxed) == 0 {
            RequestArrival::FirstBeforeReady
        } else {
            RequestArrival::Noted
        }
    }

    /// `/readyz` answered "not ready" (`ready`: whether `HasBeenReady` has fired, read after).
    pub(crate) fn not_ready_answer(&self, ready: impl Fn() -> bool) {
        if self.not_ready_probed() {
            return;
        }
        self.watch.fetch_or(NOT_READY_PROBED, Ordering::AcqRel);
        // `HasBeenReady` may have fired in between: it clears the bit, so clear it again.
        if ready() {
            self.watch.fetch_and(!NOT_READY_PROBED, Ordering::AcqRel);
        }
    }

    /// The root `/readyz` answered at `now`, after `ShutdownInitiated` or not (`shutting_down`),
    /// with "ready" or not. Before the signal it times the probe period; after it, a "not
    /// ready" answer counts as a failed probe.
    pub(crate) fn readyz_probe(&self, now: Instant, shutting_down: bool, ready: bool) {
        if shutting_down {
            if !ready {
                self.failed_probes.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let at = now.as_nanos().saturating_add(1);
        let previous = self.last_probe.swap(at, Ordering::AcqRel);
        if previous != NONE && at > previous {
            self.probe_interval
                .store((at - previous).saturating_add(1), Ordering::Release);
        }
    }

    /// Follows the lifecycle: `signal` has just fired for the first time.
    pub(crate) fn follow(&self, signal: LifecycleSignal) {
        match signal {
            LifecycleSignal::HasBeenReady => {
                self.watch.fetch_and(!NOT_READY_PROBED, Ordering::AcqRel);
            }
            LifecycleSignal::ShutdownInitiated => {
                self.watch.fetch_or(TERMINATING, Ordering::AcqRel);
            }
            LifecycleSignal::HTTPServerStoppedListening => {
                self.watch.fetch_and(!TERMINATING, Ordering::AcqRel);
            }
            _ => {}
        }
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> ArrivalCounts {
        let offset = |stored: u64| (stored != NONE).then(|| Duration::from_nanos(stored - 1));
        ArrivalCounts {
            last_new_connection: offset(self.last_connection.load(Ordering::Acquire)),
            last_new_request: offset(self.last_request.load(Ordering::Acquire)),
            late_connections: self.late_connections.load(Ordering::Relaxed),
            late_requests: self.late_requests.load(Ordering::Relaxed),
            requests_before_ready: self.before_ready.load(Ordering::Relaxed),
            readyz_probe_interval: offset(self.probe_interval.load(Ordering::Acquire)),
            failed_readyz_probes: self.failed_probes.load(Ordering::Relaxed),
        }
    }
}

/// An offset as stored: nanoseconds plus one (0 is "none").
fn stored(offset: Duration) -> u64 {
    u64::try_from(offset.as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

/// What the server saw of new connections and requests ([`Counters::arrivals`]).
///
/// A balancer that honours the readiness probe stops opening connections to a server soon
/// after `/readyz` turns red at `ShutdownInitiated`, well within the shutdown delay. A
/// connection that still arrives in the last part of the delay
/// ([`Config::late_arrival_percent`], 20 % by default) is *late*: the delay barely covered the
/// balancer. So is a connection accepted, or a request turned away, after the delay. Requests
/// on connections opened before the signal are counted, but only late connections call for a
/// warning: an HTTP/2 client keeps its connection until GOAWAY whatever the balancer does.
///
/// [`Counters::arrivals`]: crate::shared::counters::Counters::arrivals
/// [`Config::late_arrival_percent`]: crate::Config::late_arrival_percent
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArrivalCounts {
    /// From `ShutdownInitiated` to the latest connection accepted after it and before
    /// `NotAcceptingNewRequest` (`None`: none was).
    pub last_new_connection: Option<Duration>,
    /// From `ShutdownInitiated` to the latest request (health and metrics aside) that arrived
    /// after it while the server still accepted (`None`: none did).
    pub last_new_request: Option<Duration>,
    /// Connections accepted in the late part of the shutdown delay, or after it.
    pub late_connections: u64,
    /// Requests (health and metrics aside) that arrived in the late part of the shutdown
    /// delay, and requests turned away after it.
    pub late_requests: u64,
    /// Requests (health and metrics aside) that arrived after `/readyz` answered "not ready"
    /// and before it first answered "ready".
    pub requests_before_ready: u64,
    /// The time between the last two `/readyz` requests before `ShutdownInitiated`: the
    /// balancer's probe period as the server saw it (`None`: fewer than two). Several probers
    /// (a balancer with several health checkers, a kubelet beside it) interleave and make it
    /// look shorter.
    pub readyz_probe_interval: Option<Duration>,
    /// `/readyz` requests answered "not ready" from `ShutdownInitiated` on, while the server
    /// still accepted: the failed probes a balancer saw before it stopped sending (or before
    /// the delay ran out).
    pub failed_readyz_probes: u64,
}

impl ArrivalCounts {
    /// Whether a balancer still opened connections late: what the warning is about.
    #[must_use]
    pub fn has_late_connections(&self) -> bool {
        self.late_connections > 0
    }
}

/// What [`Counters::note_request`](super::counters::Counters::note_request) found worth telling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum RequestArrival {
    /// Nothing to tell.
    Noted,
    /// The first request since `/readyz` said "not ready": the balancer sends traffic to an
    /// instance whose readiness probe fails. Log it once.
    FirstBeforeReady,
}
