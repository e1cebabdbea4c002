//! The admission gate: lock-free tracking of in-flight requests.
//!
//! Two wait groups, one for normal requests and one for long-running ones (watch, SSE,
//! WebSocket), in the manner of kube-apiserver's `SafeWaitGroup` and
//! `RateLimitedSafeWaitGroup`:
//!
//! * [`Gate::admit_normal`] / [`Gate::admit_long_running`] add one request and return a
//!   ticket whose drop releases it. Admission is one atomic read-modify-write and allocates
//!   nothing.
//! * One ticket type per kind, [`NormalTicketOf`] and [`LongRunningTicketOf`], generic over
//!   how it holds the gate ([`GateRef`]): borrowed ([`NormalTicket`], from the gate itself)
//!   or owned through the lifecycle's shared state
//!   ([`OwnedNormalTicket`](crate::shared::OwnedNormalTicket), from
//!   [`Shared::admit`](crate::shared::Shared::admit), for request futures that must be
//!   `'static`). Admission and release are written once for both.
//! * Once the lifecycle closes the gate (at `NotAcceptingNewRequest`), every further
//!   admission is rejected with the [`Rejection`] of the configured mode: "add after wait" is
//!   an error, never a race. Only the lifecycle machine closes the gate and starts the
//!   pacing; those methods are not public.
//! * Waiters are woken through [`event_listener`]: the last release after closing notifies
//!   [`Gate::listen`]ers, so a driver awaits the drain instead of polling it.
//! * While the long-running drain runs, completions are paced (burst 1) at the rate the
//!   lifecycle chose, until the drain deadline; see [`LongRunningTicket::reserve_turn`].
//!
//! # Invariants
//! Each counter word holds `count << 1 | CLOSED`. All changes to a word are read-modify-write
//! operations, so they are totally ordered: an admission either precedes the close (and the
//! drain waits for it) or follows it (and sees `CLOSED` and backs out). The word is therefore
//! never observed as `CLOSED` with count 0 and later with a non-zero count that belongs to an
//! admitted request: a backed-out admission only transiently raises the count and never
//! hands out a ticket.
//!
//! Orderings: admissions are `Relaxed` (they publish nothing, like `Arc::clone`). Releases are
//! `AcqRel` so that everything a request did happens-before a drain observer that loads the
//! word with `Acquire` and sees the count at zero. Closing is `AcqRel` for the same reason.

use core::fmt;
use core::time::Duration;

use event_listener::{Event, EventListener};

use crate::config::ShutdownMode;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::time::{duration_nanos_saturating, Instant};

const CLOSED: usize = 1;
const ONE: usize = 2;

/// How many requests a gate holds, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InFlight {
    /// Normal requests.
    pub normal: usize,
    /// Long-running requests (watch, SSE, WebSocket).
    pub long_running: usize,
}

/// Why a request was not admitted, and so what the adapter answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// Close-listener mode after `NotAcceptingNewRequest`: 503 with `Retry-After: 1`
    /// (kube-apiserver's `WithWaitGroup`), the canned
    /// [`SHUTTING_DOWN`](crate::responses::SHUTTING_DOWN); counted as
    /// [`RejectionReason::NotAccepting`](crate::rejections::RejectionReason::NotAccepting).
    NotAccepting,
    /// Retry-after mode after `NotAcceptingNewRequest`: 429 with `Retry-After: 5` and
    /// `Connection: close` (kube-apiserver's `WithRetryAfter`).
    RetryAfter,
}

impl Rejection {
    /// The rejection a closed gate gives in `mode`.
    #[must_use]
    pub const fn for_mode(mode: ShutdownMode) -> Self {
        match mode {
            ShutdownMode::CloseListener => Rejection::NotAccepting,
            ShutdownMode::SendRetryAfter => Rejection::RetryAfter,
        }
    }

    /// The canned HTTP response for this rejection.
    #[must_use]
    pub const fn response(self) -> &'static crate::responses::CannedResponse {
        match self {
            Rejection::NotAccepting => &crate::responses::SHUTTING_DOWN,
            Rejection::RetryAfter => &crate::responses::RETRY_AFTER,
        }
    }

    /// The `Retry-After` this rejection's response carries: 1 s in close-listener mode, 5 s in
    /// retry-after mode. The hint a stream ended at shutdown gives its client (an event
    /// stream's `retry:` field) so that it comes back no sooner than a rejected request would.
    #[must_use]
    pub const fn retry_after(self) -> Duration {
        match self {
            Rejection::NotAccepting => Duration::from_secs(1),
            Rejection::RetryAfter => Duration::from_secs(5),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejection::NotAccepting => "server is shutting down (503)",
            Rejection::RetryAfter => "server is shutting down, retry later (429)",
        })
    }
}

/// One counter word: `count << 1 | CLOSED`.
struct WaitGroup {
    word: AtomicUsize,
}

impl WaitGroup {
    #[cfg(not(loom))]
    const fn new() -> Self {
        WaitGroup {
            word: AtomicUsize::new(0),
        }
    }

    #[cfg(loom)]
    fn new() -> Self {
        WaitGroup {
            word: AtomicUsize::new(0),
        }
    }

    /// Adds one; `false` (and nothing added) when closed.
    #[inline]
    fn try_add(&self) -> bool {
        let prev = self.word.fetch_add(ONE, Ordering::Relaxed);
        if prev & CLOSED == 0 {
            return true;
        }
        // Closed: back out. This can be the release that brings the count to zero.
        self.word.fetch_sub(ONE, Ordering::AcqRel);
        false
    }

    /// Removes one; `true` when this was the last one out of a closed group.
    #[inline]
    fn done(&self) -> bool {
        self.word.fetch_sub(ONE, Ordering::AcqRel) == CLOSED | ONE
    }

    /// Closes; returns the count at that moment.
    fn close(&self) -> usize {
        self.word.fetch_or(CLOSED, Ordering::AcqRel) >> 1
    }

    fn load(&self) -> usize {
        self.word.load(Ordering::Acquire)
    }
}

/// Completion pacing for the long-running drain: a rate limiter with burst 1, kept as the
/// next free turn (GCRA). `interval == 0` means "not pacing".
struct Pacer {
    interval_nanos: AtomicU64,
    next_turn: AtomicU64,
    deadline: AtomicU64,
}

/// The shared admission state of one lifecycle. See the [module docs](self).
pub struct Gate {
    normal: WaitGroup,
    long_running: WaitGroup,
    pacer: Pacer,
    mode: ShutdownMode,
    drained: Event,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("closed", &self.is_closed())
            .field("normal", &self.normal_in_flight())
            .field("long_running", &self.long_running_in_flight())
            .field("mode", &self.mode)
            .finish()
    }
}

impl Gate {
    /// An open gate for `mode`, with nothing in flight.
    #[must_use]
    pub fn new(mode: ShutdownMode) -> Self {
        Gate {
            normal: WaitGroup::new(),
            long_running: WaitGroup::new(),
            pacer: Pacer {
                interval_nanos: AtomicU64::new(0),
                next_turn: AtomicU64::new(0),
                deadline: AtomicU64::new(0),
            },
            mode,
            drained: Event::new(),
        }
    }

    /// Admits a normal request, or rejects it once the gate is closed.
    ///
    /// Zero allocations; one atomic read-modify-write.
    #[inline]
    pub fn admit_normal(&self) -> Result<NormalTicket<'_>, Rejection> {
        NormalTicketOf::admit(&self)
    }

    /// Admits a long-running request, or rejects it once the gate is closed.
    #[inline]
    pub fn admit_long_running(&self) -> Result<LongRunningTicket<'_>, Rejection> {
        LongRunningTicketOf::admit(&self)
    }

    /// The rejection of an admission that found the gate closed and backed out.
    ///
    /// A backed-out admission may have held the count above zero while the last real
    /// request left; make sure a waiter hears about the drain.
    #[cold]
    fn reject_after_backout(&self) -> Rejection {
        if self.normal.load() == CLOSED || self.long_running.load() == CLOSED {
            self.drained.notify(usize::MAX);
        }
        Rejection::for_mode(self.mode)
    }

    #[inline]
    fn release_normal(&self) {
        if self.normal.done() {
            self.drained.notify(usize::MAX);
        }
    }

    #[inline]
    fn release_long_running(&self) {
        if self.long_running.done() {
            self.drained.notify(usize::MAX);
        }
    }

    /// Closes the gate: every later admission is rejected. Returns the numbers of normal and
    /// long-running requests in flight at that moment. Idempotent.
    ///
    /// Only the lifecycle machine calls this, at `NotAcceptingNewRequest`: a gate closed by
    /// anyone else would reject requests without the signal firing. The model checks reach
    /// it through `testing::close` (under `cfg(loom)` or `cfg(fuzzing)` only).
    pub(crate) fn close(&self) -> (usize, usize) {
        let normal = self.normal.close();
        let long_running = self.long_running.close();
        self.drained.notify(usize::MAX);
        (normal, long_running)
    }

    /// Starts pacing long-running completions at one per `interval` (burst 1), from `now`
    /// until `deadline`. Only the lifecycle machine calls this, at the start of the watch
    /// drain (the model checks: `testing::start_pacing`).
    pub(crate) fn start_pacing(&self, now: Instant, interval: Duration, deadline: Instant) {
        let interval = duration_nanos_saturating(interval).max(1);
        self.pacer
            .deadline
            .store(deadline.as_nanos(), Ordering::Relaxed);
        self.pacer
            .next_turn
            .store(now.as_nanos(), Ordering::Relaxed);
        self.pacer.interval_nanos.store(interval, Ordering::Release);
    }

    /// The end of the paced long-running drain (the grace period), once it started; `None`
    /// before, and when long-running requests are not waited for (no grace period). What a
    /// stream told to end at its turn may still take to say goodbye is bounded by it.
    #[must_use]
    pub fn long_running_deadline(&self) -> Option<Instant> {
        if self.pacer.interval_nanos.load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(Instant::from_nanos(
            self.pacer.deadline.load(Ordering::Relaxed),
        ))
    }

    /// Whether the gate is closed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.normal.load() & CLOSED != 0
    }

    /// The shutdown mode, which decides the [`Rejection`].
    #[must_use]
    pub fn mode(&self) -> ShutdownMode {
        self.mode
    }

    /// Normal requests in flight.
    #[must_use]
    pub fn normal_in_flight(&self) -> usize {
        self.normal.load() >> 1
    }

    /// Long-running requests in flight.
    #[must_use]
    pub fn long_running_in_flight(&self) -> usize {
        self.long_running.load() >> 1
    }

    /// Both counts of requests in flight, read one after the other.
    #[must_use]
    pub fn in_flight(&self) -> InFlight {
        InFlight {
            normal: self.normal_in_flight(),
            long_running: self.long_running_in_flight(),
        }
    }

    /// Closed with no normal request in flight.
    #[must_use]
    pub fn normal_drained(&self) -> bool {
        self.normal.load() == CLOSED
    }

    /// Closed with no long-running request in flight.
    #[must_use]
    pub fn long_running_drained(&self) -> bool {
        self.long_running.load() == CLOSED
    }

    /// A listener notified whenever a closed wait group drains (and when the gate closes).
    ///
    /// Use it in the usual `event_listener` way: create the listener, re-check
    /// [`Gate::normal_drained`] / [`Gate::long_running_drained`], then await it.
    #[must_use]
    pub fn listen(&self) -> EventListener {
        self.drained.listen()
    }

    /// The turn at which a long-running completion observed at `now` may finish, or `None`
    /// when it may finish at once (no drain pacing, or past the drain deadline).
    fn reserve_turn(&self, now: Instant) -> Option<Instant> {
        let interval = self.pacer.interval_nanos.load(Ordering::Acquire);
        if interval == 0 {
            return None;
        }
        let deadline = self.pacer.deadline.load(Ordering::Relaxed);
        let now = now.as_nanos();
        let mut next = self.pacer.next_turn.load(Ordering::Relaxed);
        loop {
            let turn = next.max(now);
            if turn >= deadline {
                return None;
            }
            match self.pacer.next_turn.compare_exchange_weak(
                next,
                turn.saturating_add(interval),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) if turn > now => return Some(Instant::from_nanos(turn)),
                Ok(_) => return None,
                Err(actual) => next = actual,
            }
        }
    }
}

pub(crate) mod sealed {
    /// Seals [`GateRef`](super::GateRef).
    pub trait Sealed {
        /// What a ticket's `Debug` output puts before its kind (`Owned` for owned tickets).
        const DEBUG_PREFIX: &'static str;
    }
}

/// How a ticket holds its gate: borrowed (`&Gate`, [`NormalTicket`]) or through the
/// lifecycle's shared state (`Arc<Shared>`,
/// [`OwnedNormalTicket`](crate::shared::OwnedNormalTicket)).
///
/// Sealed: a dropped ticket releases its place through [`GateRef::gate`], so a holder must
/// reach the gate it was admitted into every time, as these two do.
pub trait GateRef: sealed::Sealed {
    /// The gate.
    fn gate(&self) -> &Gate;
}

impl sealed::Sealed for &Gate {
    const DEBUG_PREFIX: &'static str = "";
}

impl GateRef for &Gate {
    #[inline]
    fn gate(&self) -> &Gate {
        self
    }
}

/// A normal request's place in the gate held by `G`; dropping it releases the place.
///
/// Named [`NormalTicket`] when borrowed and
/// [`OwnedNormalTicket`](crate::shared::OwnedNormalTicket) when owned.
#[must_use = "dropping the ticket releases the request at once"]
pub struct NormalTicketOf<G: GateRef> {
    holder: G,
}

/// A normal request's place in a borrowed gate; see [`Gate::admit_normal`].
pub type NormalTicket<'a> = NormalTicketOf<&'a Gate>;

impl<G: GateRef + Clone> NormalTicketOf<G> {
    /// Admits a normal request into `holder`'s gate; clones the holder only on success.
    #[inline]
    pub(crate) fn admit(holder: &G) -> Result<Self, Rejection> {
        let gate = holder.gate();
        if gate.normal.try_add() {
            Ok(NormalTicketOf {
                holder: holder.clone(),
            })
        } else {
            Err(gate.reject_after_backout())
        }
    }
}

impl<G: GateRef> NormalTicketOf<G> {
    /// What holds the gate (for an owned ticket, the lifecycle's shared state).
    pub fn holder(&self) -> &G {
        &self.holder
    }
}

impl<G: GateRef> Drop for NormalTicketOf<G> {
    #[inline]
    fn drop(&mut self) {
        self.holder.gate().release_normal();
    }
}

impl<G: GateRef> fmt::Debug for NormalTicketOf<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(G::DEBUG_PREFIX)?;
        f.write_str("NormalTicket")
    }
}

/// A long-running request's place in the gate held by `G`; dropping it releases the place.
///
/// Named [`LongRunningTicket`] when borrowed and
/// [`OwnedLongRunningTicket`](crate::shared::OwnedLongRunningTicket) when owned.
#[must_use = "dropping the ticket releases the request at once"]
pub struct LongRunningTicketOf<G: GateRef> {
    holder: G,
}

/// A long-running request's place in a borrowed gate; see [`Gate::admit_long_running`].
pub type LongRunningTicket<'a> = LongRunningTicketOf<&'a Gate>;

impl<G: GateRef + Clone> LongRunningTicketOf<G> {
    /// Admits a long-running request into `holder`'s gate; clones the holder only on success.
    #[inline]
    pub(crate) fn admit(holder: &G) -> Result<Self, Rejection> {
        let gate = holder.gate();
        if gate.long_running.try_add() {
            Ok(LongRunningTicketOf {
                holder: holder.clone(),
            })
        } else {
            Err(gate.reject_after_backout())
        }
    }
}

impl<G: GateRef> LongRunningTicketOf<G> {
    /// Reserves this request's turn to end in the paced drain.
    ///
    /// Returns `None` when the stream may end at once, or the instant until which the
    /// adapter holds the end of the stream (and the ticket) before letting it finish. Call it
    /// once, when the stream ends gracefully; a ticket dropped without it is released at once.
    #[must_use]
    pub fn reserve_turn(&self, now: Instant) -> Option<Instant> {
        self.holder.gate().reserve_turn(now)
    }

    /// What holds the gate.
    pub fn holder(&self) -> &G {
        &self.holder
    }
}

impl<G: GateRef> Drop for LongRunningTicketOf<G> {
    #[inline]
    fn drop(&mut self) {
        self.holder.gate().release_long_running();
    }
}

impl<G: GateRef> fmt::Debug for LongRunningTicketOf<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(G::DEBUG_PREFIX)?;
        f.write_str("LongRunningTicket")
    }
}

/// The gate's mutators, public only for the model checks (`tests/loom.rs` under
/// `cfg(loom)`, the fuzz targets under `cfg(fuzzing)`). Everywhere else only the lifecycle
/// machine closes the gate, so `NotAcceptingNewRequest` always fires with it.
#[cfg(any(loom, fuzzing))]
#[doc(hidden)]
pub mod testing {
    use core::time::Duration;

    use super::Gate;
    use crate::time::Instant;

    /// [`Gate::close`], for model checks.
    pub fn close(gate: &Gate) -> (usize, usize) {
        gate.close()
    }

    /// [`Gate::start_pacing`], for model checks.
    pub fn start_pacing(gate: &Gate, now: Instant, interval: Duration, deadline: Instant) {
        gate.start_pacing(now, interval, deadline);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
