//! The part of a lifecycle that request tasks read concurrently.
//!
//! The [`Machine`](crate::Machine) is the only writer of the termination state: it fires
//! signals and closes the gate here as part of its transitions, so this is the one place
//! the lifecycle's state lives for everyone else. Request tasks read it to admit requests
//! ([`Shared::admit`]), to answer health checks ([`Shared::health`]) and to learn when a
//! signal fires ([`Shared::signal_fired`]). The only signal fired from a request task is
//! `HasBeenReady`, on the first 200 from `/readyz`.
//!
//! [`Shared`] itself holds what the lifecycle decides: admission, health, signals, the
//! phase, connection bounds, idle-close and keep-alive. What it counts (rejections, requests
//! served after the close, arrivals, WebSocket goodbyes, connections cut at their bound) is
//! reached through its own view, [`Shared::counters`] (the [`counters`] module).

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use event_listener::Event;

use crate::classify::{default_is_long_running, RequestClass, RequestInfo};
use crate::config::Config;
use crate::connection::ConnectionKind;
use crate::gate::{sealed, Gate, GateRef, LongRunningTicketOf, NormalTicketOf, Rejection};
use crate::phase::{Phase, Progress};
use crate::rejections::RejectionCounters;
use crate::signal::LifecycleSignal;
use crate::sync::{AtomicU64, AtomicU8, Ordering};
use crate::time::Instant;

// The modules that write `impl Shared` (after_close, bounds, counters, health, signals)
// use this one; this one uses only those that do not (arrivals, checks, goodbyes, peers).
mod after_close;
mod arrivals;
mod bounds;
mod checks;
pub mod counters;
mod goodbyes;
mod health;
mod peers;
// Its future is re-exported at the crate root (`crate::LifecycleSignalFired`).
pub(crate) mod signals;

use self::arrivals::Arrivals;
pub(crate) use self::checks::{Check, CheckKind, PostStartState};
pub use self::checks::{CheckFn, EndpointSet};
use self::goodbyes::Goodbyes;
use self::peers::Peers;

const NOT_YET: u64 = u64::MAX;

/// An owned normal ticket, from [`Shared::admit`], for request futures that must be
/// `'static`: it holds an `Arc` of the lifecycle's shared state (cloning it is one more
/// atomic increment, still with no allocation).
pub type OwnedNormalTicket = NormalTicketOf<Arc<Shared>>;

/// An owned long-running ticket, from [`Shared::admit`]; see [`OwnedNormalTicket`].
pub type OwnedLongRunningTicket = LongRunningTicketOf<Arc<Shared>>;

impl sealed::Sealed for Arc<Shared> {
    const DEBUG_PREFIX: &'static str = "Owned";
}

impl GateRef for Arc<Shared> {
    #[inline]
    fn gate(&self) -> &Gate {
        &self.gate
    }
}

impl OwnedNormalTicket {
    /// The shared state this ticket belongs to.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.holder()
    }
}

impl OwnedLongRunningTicket {
    /// The shared state this ticket belongs to.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        self.holder()
    }
}

/// How the admission layer treats one request; see [`Shared::admit`].
#[derive(Debug)]
#[must_use = "dropping the admission releases the request at once"]
pub enum Admission {
    /// Serve it; the ticket tracks it until dropped.
    Normal(OwnedNormalTicket),
    /// Serve it as long-running; end the stream when
    /// [`LifecycleSignal::NotAcceptingNewRequest`] fires, then pace the end with
    /// [`OwnedLongRunningTicket::reserve_turn`].
    LongRunning(OwnedLongRunningTicket),
    /// Serve it, never rejected (health and metrics paths). Admitted before the gate closes,
    /// it is tracked in the normal drain, with the request timeout, like a normal request
    /// (the ticket); after that it is served untracked (`None`), as kube-apiserver's
    /// `WithWaitGroup` does.
    Exempt(Option<OwnedNormalTicket>),
    /// Answer with the rejection's canned response.
    Rejected(Rejection),
    /// Serve it although the gate has closed: it came on a connection that cannot turn it
    /// away cleanly (see [`ConnectionKind`] and [`Shared::admit_on`]). Untracked, like an
    /// exempt request after the close: the adapter bounds it by the request timeout, ends
    /// its connection after the response, and gives a long-running one a shutdown notice
    /// that has already fired, so that it ends at once. The drain does not wait for it; the
    /// wait for the connections does.
    Late(RequestClass),
}

/// Shared lifecycle state. Create it through [`Machine`](crate::Machine) (or the
/// [`Lifecycle`](crate::Lifecycle) typestate API); hold it in an `Arc`.
pub struct Shared {
    config: Config,
    gate: Gate,
    fired: AtomicU8,
    fired_at: [AtomicU64; LifecycleSignal::COUNT],
    signal_event: Event,
    started_at: AtomicU64,
    /// The machine's progress outside the signals (bits of [`Progress`]), for
    /// [`Shared::phase`].
    progress: AtomicU8,
    checks: Vec<Check>,
    post_start: Vec<AtomicU8>,
    /// Requests turned away, by reason (counted on the rejection paths only).
    rejections: RejectionCounters,
    /// [`SOCKETS_OUTLIVE`] and [`KEEP_ALIVE_ENDED`].
    sockets: AtomicU8,
    /// Requests served after the gate closed ([`Admission::Late`]).
    pub(crate) served_after_close: AtomicU64,
    /// New connections and requests as the balancer sent them (`Counters::arrivals`).
    pub(crate) arrivals: Arrivals,
    /// The WebSocket Close frames sent at shutdown, and their answers (`Counters::goodbyes`).
    goodbyes: Goodbyes,
    /// The connections closed at their bound with their peers silent, and the last close
    /// (`Counters::peer_counts`).
    peers: Peers,
}

/// A bit of `Shared::sockets`: the listening sockets outlive this process.
const SOCKETS_OUTLIVE: u8 = 1;
/// A bit of `Shared::sockets`: every response ends its keep-alive connection.
const KEEP_ALIVE_ENDED: u8 = 2;

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("fired", &self.fired())
            .field("gate", &self.gate)
            .field(
                "checks",
                &self.checks.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn new(config: Config, checks: Vec<Check>, post_start_hooks: usize) -> Self {
        let mode = config.mode();
        Shared {
            config,
            gate: Gate::new(mode),
            fired: AtomicU8::new(0),
            fired_at: core::array::from_fn(|_| AtomicU64::new(NOT_YET)),
            signal_event: Event::new(),
            started_at: AtomicU64::new(NOT_YET),
            progress: AtomicU8::new(0),
            sockets: AtomicU8::new(0),
            served_after_close: AtomicU64::new(0),
            arrivals: Arrivals::new(),
            goodbyes: Goodbyes::new(),
            peers: Peers::new(),
            checks,
            post_start: (0..post_start_hooks)
                .map(|_| AtomicU8::new(PostStartState::Pending as u8))
                .collect(),
            rejections: RejectionCounters::new(),
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The admission gate.
    #[must_use]
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub(crate) fn set_started(&self, now: Instant) {
        self.started_at.store(now.as_nanos(), Ordering::Release);
        self.record_progress(Progress::Started);
    }

    /// Records a step of the machine's progress outside the signals (only the machine calls
    /// this).
    pub(crate) fn record_progress(&self, step: Progress) {
        self.progress.fetch_or(step.bit(), Ordering::AcqRel);
    }

    /// Whether the machine has recorded `step`.
    pub(crate) fn has_progressed(&self, step: Progress) -> bool {
        self.progress.load(Ordering::Acquire) & step.bit() != 0
    }

    /// The lifecycle's phase, as the machine and every request task see it: the one phase
    /// function ([`Machine::phase`](crate::Machine::phase) returns this once prepared). The
    /// [`phase`](crate::phase) module says what marks each phase.
    #[must_use]
    pub fn phase(&self) -> Phase {
        let progress = self.progress.load(Ordering::Acquire);
        if progress & Progress::Exited.bit() != 0 {
            return Phase::Exited;
        }
        if progress & Progress::Started.bit() == 0 {
            return Phase::Prepared;
        }
        let fired = self.fired();
        if fired.contains(LifecycleSignal::InFlightRequestsDrained)
            && fired.contains(LifecycleSignal::HTTPServerStoppedListening)
        {
            Phase::Stopping
        } else if fired.contains(LifecycleSignal::NotAcceptingNewRequest) {
            Phase::Draining
        } else if fired.contains(LifecycleSignal::ShutdownInitiated) {
            Phase::LameDuck
        } else if progress & Progress::Serving.bit() != 0 {
            Phase::Serving
        } else {
            Phase::Starting
        }
    }

    /// Classifies a request: exempt by path prefix (configurable), long-running by
    /// `is_long_running`, normal otherwise.
    #[must_use]
    pub fn classify(
        &self,
        req: &RequestInfo<'_>,
        is_long_running: impl FnOnce(&RequestInfo<'_>) -> bool,
    ) -> RequestClass {
        if self.config.is_exempt_path(req.path) {
            RequestClass::Exempt
        } else if is_long_running(req) {
            RequestClass::LongRunning
        } else {
            RequestClass::Normal
        }
    }

    /// Classifies with the default long-running predicate,
    /// [`default_is_long_running`].
    #[must_use]
    pub fn classify_default(&self, req: &RequestInfo<'_>) -> RequestClass {
        self.classify(req, default_is_long_running)
    }

    /// Admits a request of `class` that came on a connection of unknown kind: once the gate
    /// has closed, it is rejected. Allocation-free; inlined (adapters call it per request).
    #[inline]
    pub fn admit(self: &Arc<Self>, class: RequestClass) -> Admission {
        self.admit_on(class, ConnectionKind::Unknown)
    }

    /// Says that the listening sockets outlive this process (systemd keeps them, or a
    /// successor took them over: the machine says so itself after a hand-over). From
    /// [`LifecycleSignal::ShutdownInitiated`] on, the drivers then stop accepting and every response
    /// ends its keep-alive connection, so that clients move to the other process.
    pub fn set_sockets_outlive(&self) {
        self.sockets.fetch_or(SOCKETS_OUTLIVE, Ordering::AcqRel);
    }

    /// Whether the listening sockets outlive this process ([`Shared::set_sockets_outlive`]).
    #[must_use]
    pub fn sockets_outlive(&self) -> bool {
        self.sockets.load(Ordering::Acquire) & SOCKETS_OUTLIVE != 0
    }

    /// Whether every response ends its keep-alive connection (`Connection: close`, GOAWAY):
    /// from [`LifecycleSignal::NotAcceptingNewRequest`], or [`LifecycleSignal::ShutdownInitiated`] when the
    /// sockets outlive this process. One relaxed load: ask it for every response.
    #[must_use]
    #[inline]
    pub fn keep_alive_ended(&self) -> bool {
        self.sockets.load(Ordering::Relaxed) & KEEP_ALIVE_ENDED != 0
    }

    /// Ends keep-alive ([`Shared::keep_alive_ended`]); the machine calls it.
    pub(crate) fn end_keep_alive(&self) {
        self.sockets.fetch_or(KEEP_ALIVE_ENDED, Ordering::AcqRel);
    }
}
