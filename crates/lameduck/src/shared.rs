//! The part of a lifecycle that request tasks read concurrently.
//!
//! The [`Machine`](crate::Machine) is the only writer of the termination state: it fires
//! signals and closes the gate here as part of its transitions, so this is the one place
//! the lifecycle's state lives for everyone else. Request tasks read it to admit requests
//! ([`Shared::admit`]), to answer health checks ([`Shared::health`]) and to learn when a
//! signal fires ([`Shared::signal_fired`]). The only signal fired from a request task is
//! `HasBeenReady`, on the first 200 from `/readyz`.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use event_listener::{Event, EventListener};

use crate::classify::{default_is_long_running, RequestClass, RequestInfo};
use crate::config::Config;
use crate::connection::ConnectionKind;
use crate::gate::{sealed, Gate, GateRef, LongRunningTicketOf, NormalTicketOf, Rejection};
use crate::health::{self, CheckOutcome, Endpoint, HealthQuery, HealthResponse, HealthTarget};
use crate::phase::{MachineStage, Phase};
use crate::rejections::{RejectionCounters, RejectionCounts, RejectionReason};
use crate::signal::{LifecycleSignal, SignalSet};
use crate::sync::{AtomicU64, AtomicU8, Ordering};
use crate::time::Instant;

mod after_close;

const NOT_YET: u64 = u64::MAX;

/// A user health check: `Ok(())` when healthy, or the reason it is not.
pub type CheckFn = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Which endpoints a health check is installed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointSet(u8);

impl EndpointSet {
    /// `/readyz` only.
    pub const READYZ: EndpointSet = EndpointSet(1);
    /// `/livez` only.
    pub const LIVEZ: EndpointSet = EndpointSet(2);
    /// `/healthz` only.
    pub const HEALTHZ: EndpointSet = EndpointSet(4);
    /// All three, like kube-apiserver's `AddHealthChecks`.
    pub const ALL: EndpointSet = EndpointSet(7);

    /// The union of two sets.
    #[must_use]
    pub const fn union(self, other: EndpointSet) -> EndpointSet {
        EndpointSet(self.0 | other.0)
    }

    /// Whether `endpoint` is in the set.
    #[must_use]
    pub const fn contains(self, endpoint: Endpoint) -> bool {
        let bit = match endpoint {
            Endpoint::Readyz => 1,
            Endpoint::Livez => 2,
            Endpoint::Healthz => 4,
        };
        self.0 & bit != 0
    }
}

/// What a check consults.
pub(crate) enum CheckKind {
    Ping,
    /// Fails from `ShutdownInitiated` on.
    Shutdown,
    /// `poststarthook/<name>`: fails `not finished` until the hook returns.
    PostStartHook {
        slot: usize,
    },
    User(CheckFn),
}

pub(crate) struct Check {
    pub(crate) name: String,
    pub(crate) endpoints: EndpointSet,
    pub(crate) kind: CheckKind,
}

/// State of a post-start hook, as its health check sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PostStartState {
    Pending = 0,
    Succeeded = 1,
    Failed = 2,
}

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
    /// [`OwnedLongRunningTicket::reserve_release`].
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
    /// its connection after the response, and hands a long-running one a shutdown signal
    /// that has already fired, so that it ends at once. The drain does not wait for it; the
    /// wait for the connections does.
    Late(RequestClass),
}

/// The machine's progress that the signals do not show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RunStage {
    /// Prepared, not started.
    Prepared,
    /// Started; not every listener serves yet.
    Starting,
    /// Every listener served once.
    Serving,
    /// The exit was decided.
    Exited,
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
    /// The machine's progress outside the signals ([`RunStage`]), for [`Shared::phase`].
    run_stage: AtomicU8,
    checks: Vec<Check>,
    post_start: Vec<AtomicU8>,
    /// Requests turned away, by reason (counted on the rejection paths only).
    rejections: RejectionCounters,
    /// [`SOCKETS_OUTLIVE`] and [`KEEP_ALIVE_ENDED`].
    sockets: AtomicU8,
    /// Requests served after the gate closed ([`Admission::Late`]).
    pub(crate) served_after_close: AtomicU64,
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
            run_stage: AtomicU8::new(RunStage::Prepared as u8),
            sockets: AtomicU8::new(0),
            served_after_close: AtomicU64::new(0),
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

    /// Fires `signal` at `now`; returns whether it was the first time.
    pub(crate) fn fire(&self, signal: LifecycleSignal, now: Instant) -> bool {
        // Record the instant first so that anyone who sees the bit also sees the instant.
        let _ = self.fired_at[signal.index()].compare_exchange(
            NOT_YET,
            now.as_nanos(),
            Ordering::Release,
            Ordering::Relaxed,
        );
        let prev = self.fired.fetch_or(signal.bit(), Ordering::AcqRel);
        let first = prev & signal.bit() == 0;
        if first {
            self.signal_event.notify(usize::MAX);
        }
        first
    }

    /// Fires `signal` at `now` unless `blocker` has fired, in one atomic step: a readiness
    /// answer computed just before `ShutdownInitiated` cannot publish `HasBeenReady` after it.
    fn fire_unless(&self, signal: LifecycleSignal, blocker: LifecycleSignal, now: Instant) -> bool {
        let _ = self.fired_at[signal.index()].compare_exchange(
            NOT_YET,
            now.as_nanos(),
            Ordering::Release,
            Ordering::Relaxed,
        );
        let mut current = self.fired.load(Ordering::Acquire);
        loop {
            if current & (signal.bit() | blocker.bit()) != 0 {
                return false;
            }
            match self.fired.compare_exchange_weak(
                current,
                current | signal.bit(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.signal_event.notify(usize::MAX);
                    return true;
                }
                Err(actual) => current = actual,
            }
        }
    }

    pub(crate) fn set_started(&self, now: Instant) {
        self.started_at.store(now.as_nanos(), Ordering::Release);
        self.set_run_stage(RunStage::Starting);
    }

    /// Records the machine's progress outside the signals (only the machine calls this).
    pub(crate) fn set_run_stage(&self, stage: RunStage) {
        self.run_stage.store(stage as u8, Ordering::Release);
    }

    /// The machine's coarse stage, from the same value as [`Shared::phase`] (a shared state
    /// exists from [`MachineStage::Prepared`] on).
    pub(crate) fn stage(&self) -> MachineStage {
        match self.run_stage.load(Ordering::Acquire) {
            s if s == RunStage::Prepared as u8 => MachineStage::Prepared,
            s if s == RunStage::Exited as u8 => MachineStage::Exited,
            _ => MachineStage::Running,
        }
    }

    /// The lifecycle's phase, as the machine and every request task see it: the one phase
    /// function ([`Machine::phase`](crate::Machine::phase) returns this once prepared).
    #[must_use]
    pub fn phase(&self) -> Phase {
        let stage = self.run_stage.load(Ordering::Acquire);
        if stage == RunStage::Exited as u8 {
            return Phase::Exited;
        }
        if stage == RunStage::Prepared as u8 {
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
        } else if stage == RunStage::Serving as u8 {
            Phase::Serving
        } else {
            Phase::Starting
        }
    }

    pub(crate) fn set_post_start(&self, slot: usize, state: PostStartState) {
        if let Some(s) = self.post_start.get(slot) {
            s.store(state as u8, Ordering::Release);
        }
    }

    /// The signals fired so far.
    #[must_use]
    pub fn fired(&self) -> SignalSet {
        SignalSet::from_bits(self.fired.load(Ordering::Acquire))
    }

    /// Whether `signal` has fired.
    #[must_use]
    pub fn has_fired(&self, signal: LifecycleSignal) -> bool {
        self.fired().contains(signal)
    }

    /// When `signal` fired, if it has.
    #[must_use]
    pub fn fired_at(&self, signal: LifecycleSignal) -> Option<Instant> {
        if !self.has_fired(signal) {
            return None;
        }
        match self.fired_at[signal.index()].load(Ordering::Acquire) {
            NOT_YET => None,
            n => Some(Instant::from_nanos(n)),
        }
    }

    /// A future that resolves once `signal` has fired (at once if it already has).
    ///
    /// Runtime-agnostic: it is woken through `event_listener`. Long-running handlers await
    /// `signal_fired(LifecycleSignal::NotAcceptingNewRequest)` to learn when to end their streams.
    pub fn signal_fired(self: &Arc<Self>, signal: LifecycleSignal) -> LifecycleSignalFired {
        LifecycleSignalFired {
            shared: Arc::clone(self),
            signal,
            listener: None,
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

    /// Counts a request the adapter turned away for `reason` (a 504 or an aborted response at
    /// the request timeout, an unknown path before the routes are ready); [`Shared::admit`]
    /// counts closed-gate rejections itself. Call it on the rejection path only.
    #[cold]
    pub fn count_rejection(&self, reason: RejectionReason) {
        self.rejections.count(reason);
    }

    /// The requests turned away so far, by reason.
    #[must_use]
    pub fn rejections(&self) -> RejectionCounts {
        self.rejections.snapshot()
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

    /// Whether every registered readiness-of-routes signal has fired. Before that, adapters
    /// answer unknown paths with [`crate::responses::ROUTES_NOT_READY`].
    #[must_use]
    pub fn routes_complete(&self) -> bool {
        self.has_fired(LifecycleSignal::MuxAndDiscoveryComplete)
    }

    /// The names of the checks installed on `endpoint`, in evaluation order.
    pub fn check_names(&self, endpoint: Endpoint) -> impl Iterator<Item = &str> {
        self.checks
            .iter()
            .filter(move |c| c.endpoints.contains(endpoint))
            .map(|c| c.name.as_str())
    }

    fn run_check(&self, check: &Check, endpoint: Endpoint, now: Instant) -> Result<(), String> {
        match &check.kind {
            CheckKind::Ping => Ok(()),
            CheckKind::Shutdown => {
                if self.has_fired(LifecycleSignal::ShutdownInitiated) {
                    Err(String::from("process is shutting down"))
                } else {
                    Ok(())
                }
            }
            CheckKind::PostStartHook { slot } => {
                let state = self
                    .post_start
                    .get(*slot)
                    .map_or(PostStartState::Pending as u8, |s| s.load(Ordering::Acquire));
                if state == PostStartState::Succeeded as u8 {
                    return Ok(());
                }
                if endpoint == Endpoint::Livez && self.in_livez_grace(now) {
                    return Ok(());
                }
                if state == PostStartState::Failed as u8 {
                    Err(String::from("hook failed"))
                } else {
                    Err(String::from("not finished"))
                }
            }
            CheckKind::User(f) => f(),
        }
    }

    /// `now <= start + livez_grace_period` (kube-apiserver's `delayedHealthCheck`).
    fn in_livez_grace(&self, now: Instant) -> bool {
        match self.started_at.load(Ordering::Acquire) {
            NOT_YET => true,
            start => now <= Instant::from_nanos(start) + self.config.livez_grace_period(),
        }
    }

    /// Answers a health request: `path` as received, `query` the raw query string.
    ///
    /// Returns `None` when the path is not a health path. A 200 from the root `/readyz`
    /// fires [`LifecycleSignal::HasBeenReady`] the first time.
    #[must_use]
    pub fn health(&self, path: &str, query: Option<&str>, now: Instant) -> Option<HealthResponse> {
        let target = health::route(path)?;
        Some(match target {
            HealthTarget::Root(endpoint) => {
                let query = health::parse_query(query);
                self.health_root(endpoint, &query, now)
            }
            HealthTarget::Check(endpoint, name) => {
                let check = self
                    .checks
                    .iter()
                    .find(|c| c.endpoints.contains(endpoint) && c.name == name);
                match check {
                    None => health::render_check(None),
                    Some(c) => {
                        let result = self.run_check(c, endpoint, now);
                        let outcome = CheckOutcome {
                            name: &c.name,
                            result: result.as_ref().map(|_| ()).map_err(String::as_str),
                        };
                        health::render_check(Some(&outcome))
                    }
                }
            }
        })
    }

    fn health_root(&self, endpoint: Endpoint, query: &HealthQuery, now: Instant) -> HealthResponse {
        let results: Vec<(&str, Result<(), String>)> = self
            .checks
            .iter()
            .filter(|c| c.endpoints.contains(endpoint))
            .map(|c| {
                let excluded = query.is_excluded(&c.name);
                // Excluded checks are not run, as in kube-apiserver.
                let r = if excluded {
                    Ok(())
                } else {
                    self.run_check(c, endpoint, now)
                };
                (c.name.as_str(), r)
            })
            .collect();
        let outcomes: Vec<CheckOutcome<'_>> = results
            .iter()
            .map(|(name, r)| CheckOutcome {
                name,
                result: r.as_ref().map(|_| ()).map_err(String::as_str),
            })
            .collect();
        let response = health::render_root(endpoint, &outcomes, query);
        if endpoint == Endpoint::Readyz && response.status == 200 {
            self.fire_unless(
                LifecycleSignal::HasBeenReady,
                LifecycleSignal::ShutdownInitiated,
                now,
            );
        }
        response
    }
}

/// Resolves once a signal has fired; see [`Shared::signal_fired`].
#[must_use = "futures do nothing unless polled"]
pub struct LifecycleSignalFired {
    shared: Arc<Shared>,
    signal: LifecycleSignal,
    listener: Option<EventListener>,
}

impl fmt::Debug for LifecycleSignalFired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LifecycleSignalFired")
            .field("signal", &self.signal)
            .finish()
    }
}

impl Future for LifecycleSignalFired {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            if this.shared.has_fired(this.signal) {
                return Poll::Ready(());
            }
            match this.listener.as_mut() {
                None => this.listener = Some(this.shared.signal_event.listen()),
                Some(l) => {
                    if Pin::new(l).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.listener = None;
                }
            }
        }
    }
}
