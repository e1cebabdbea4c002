//! HTTP/1's header-read timeout (the slowloris protection), kept outside hyper: a
//! connection that waits for a request head must receive the whole head within
//! [`HEADER_READ_TIMEOUT`], or it is closed. The wait starts when the connection opens and
//! again whenever its last response has ended (an idle keep-alive connection is closed after
//! the same time).
//!
//! Giving hyper a timer would do this too, but hyper then starts a timer for every request
//! head and reads the socket once more after every response; here a request costs a few
//! atomic operations, and the clock is read once per second of activity ([`HeadWatch`]).
//! The connection's service, its requests and its task share one [`ConnActivity`]:
//!
//! - the service counts the heads it is called with and gives each request an [`InFlight`]
//!   guard, held until the response body has ended (through it, the request also reaches the
//!   connection's admission layer);
//! - the task marks the connection as HTTP/2 once it has read the client preface, which
//!   turns the watch off (hyper has no header-read timeout for HTTP/2 either), and, through
//!   its [`HeadWatch`], checks each time the connection is pending whether it now waits for a
//!   head, keeps one timer, and says when the deadline has passed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

use crate::flag::Flag;
use crate::request::layer::AdmissionLayer;
use crate::runtime::Runtime;

/// How long an HTTP/1 connection may wait for a complete request head (hyper's default).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What one connection's service, I/O, task and requests share.
#[derive(Debug)]
pub(crate) struct ConnActivity<R: Runtime> {
    /// Request heads received (the service was called).
    heads: AtomicUsize,
    /// Requests whose response has ended (their [`InFlight`] was dropped).
    ended: AtomicUsize,
    /// The connection speaks HTTP/2: no header-read timeout.
    http2: AtomicBool,
    /// Set by an HTTP/2 response that asks to close the connection: send GOAWAY.
    pub(crate) goaway: Flag,
    /// The admission decision every request of the connection goes through (held here, so
    /// that a request reaches it through its [`InFlight`] without a reference count of its
    /// own).
    pub(crate) admission: AdmissionLayer<R>,
    /// When the connection arrived, while the lifecycle watched arrivals: reported with its
    /// first request other than health and metrics.
    arrival: Option<crate::arrivals::ConnectionArrival>,
    /// What the connection's stop bound needs of its work (see [`Work`]).
    pub(crate) work: Work,
}

/// What a stopped connection's bound ([`lameduck::Shared::connection_bound`]) needs to know
/// of the requests in flight on it, beyond their number: how many are long-running, the
/// latest deadline of those served after the gate closed, and the connection's task to wake
/// when a request ends once the connection has stopped. Only long-running requests, requests
/// after the gate closed and the ends of requests on a stopped connection write here.
#[derive(Debug, Default)]
pub(crate) struct Work {
    /// Long-running requests in flight.
    long_running: AtomicUsize,
    /// The latest deadline (core instant in nanoseconds, 0: none) of the requests served
    /// after the gate closed.
    late_until: AtomicU64,
    /// The connection has stopped: a request's end wakes its task.
    watched: AtomicBool,
    task: AtomicWaker,
}

impl Work {
    /// From now on, a request's end (or a change of its class) wakes `waker`'s task.
    pub(crate) fn watch(&self, waker: &Waker) {
        self.task.register(waker);
        self.watched.store(true, Ordering::Release);
    }

    /// Long-running requests in flight.
    pub(crate) fn long_running(&self) -> usize {
        self.long_running.load(Ordering::Acquire)
    }

    /// The latest deadline of the requests served after the gate closed.
    pub(crate) fn late_until(&self) -> Option<lameduck::Instant> {
        match self.late_until.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(lameduck::Instant::from_nanos(nanos)),
        }
    }

    #[inline]
    fn changed(&self) {
        if self.watched.load(Ordering::Acquire) {
            self.task.wake();
        }
    }
}

impl<R: Runtime> ConnActivity<R> {
    /// The activity of a new connection whose requests `admission` admits.
    pub(crate) fn new(admission: AdmissionLayer<R>) -> Self {
        ConnActivity {
            arrival: admission.connection_arrival(),
            heads: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            http2: AtomicBool::new(false),
            goaway: Flag::default(),
            admission,
            work: Work::default(),
        }
    }

    /// Called for every request head, before it is served.
    #[inline]
    pub(crate) fn head_received(self: &Arc<Self>) -> InFlight<R> {
        self.heads.fetch_add(1, Ordering::Relaxed);
        InFlight {
            activity: Arc::clone(self),
            long_running: false,
        }
    }

    /// Requests in flight: heads received whose response has not ended.
    pub(crate) fn in_flight(&self) -> usize {
        // Ended is read first: a request that ends in between is still counted, never one
        // too few.
        let ended = self.ended.load(Ordering::Acquire);
        self.heads().saturating_sub(ended)
    }

    /// Whether the connection speaks HTTP/2.
    pub(crate) fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    /// Request heads received so far.
    pub(crate) fn heads(&self) -> usize {
        self.heads.load(Ordering::Relaxed)
    }

    /// Whether every request head received has had its response end: the connection is
    /// idle (or has carried nothing yet).
    pub(crate) fn is_idle(&self) -> bool {
        self.ended.load(Ordering::Acquire) == self.heads()
    }

    /// Marks the connection as HTTP/2.
    pub(crate) fn set_http2(&self) {
        self.http2.store(true, Ordering::Relaxed);
    }
}

/// Held from a request's head until its response body has ended: the connection is busy.
#[derive(Debug)]
pub(crate) struct InFlight<R: Runtime> {
    activity: Arc<ConnActivity<R>>,
    /// Counted among the connection's long-running requests.
    long_running: bool,
}

impl<R: Runtime> InFlight<R> {
    /// The connection's admission decision.
    #[inline]
    pub(crate) fn admission(&self) -> &AdmissionLayer<R> {
        &self.activity.admission
    }

    /// When the connection arrived, if the lifecycle watched arrivals then.
    #[inline]
    pub(crate) fn arrival(&self) -> Option<&crate::arrivals::ConnectionArrival> {
        self.activity.arrival.as_ref()
    }

    /// Counts this request among the connection's long-running ones (its bound at the stop
    /// is the grace period, not the request timeout).
    #[cold]
    pub(crate) fn set_long_running(&mut self) {
        if !self.long_running {
            self.long_running = true;
            let work = &self.activity.work;
            work.long_running.fetch_add(1, Ordering::AcqRel);
            work.changed();
        }
    }

    /// Notes that this request was served after the gate closed, so is bounded by its own
    /// deadline: the request timeout from now (read once, on this path only).
    #[cold]
    pub(crate) fn set_served_late(&self) {
        let admission = &self.activity.admission;
        let now = admission.clock.instant(admission.runtime.now());
        let timeout = admission.shared.config().request_timeout();
        let until = if timeout.is_zero() {
            lameduck::Instant::MAX
        } else {
            now + timeout
        };
        let work = &self.activity.work;
        work.late_until
            .fetch_max(until.as_nanos().max(1), Ordering::AcqRel);
        work.changed();
    }

    /// The kind of connection the request came on, for admission after the gate closed.
    #[inline]
    pub(crate) fn connection_kind(&self) -> lameduck::ConnectionKind {
        if self.activity.http2.load(Ordering::Relaxed) {
            lameduck::ConnectionKind::Http2
        } else {
            lameduck::ConnectionKind::Http1
        }
    }

    /// Looks at the response about to be sent: on HTTP/2, which has no `Connection` header,
    /// `Connection: close` (retry-after mode's 429) becomes a GOAWAY for the connection.
    #[inline(always)]
    pub(crate) fn before_response(&self, headers: &mut http::HeaderMap) {
        if self.activity.http2.load(Ordering::Relaxed) {
            self.before_http2_response(headers);
        }
    }

    #[cold]
    #[inline(never)]
    fn before_http2_response(&self, headers: &mut http::HeaderMap) {
        let close = headers
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        if close {
            headers.remove(http::header::CONNECTION);
            self.activity.goaway.set();
        }
    }
}

impl<R: Runtime> Drop for InFlight<R> {
    fn drop(&mut self) {
        let activity = &self.activity;
        if self.long_running {
            activity.work.long_running.fetch_sub(1, Ordering::AcqRel);
        }
        activity.ended.fetch_add(1, Ordering::Release);
        activity.work.changed();
    }
}

/// Wakes the connection task when the watch's timer fires, and says that it did, so the
/// task polls the timer only then.
#[derive(Default)]
struct TimerWake {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for TimerWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// How stale the watch's clock may be while the connection is active: a wait for a head is
/// timed from a reading at most this old, so a connection is closed up to this much before
/// its timeout (never after).
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// The connection task's side: when the connection waits for a head, and one timer.
///
/// The clock is not read per request. While requests arrive, the timer *ticks* once per
/// [`TICK`] and each tick reads the clock (the *epoch*); a wait that starts between ticks is
/// dated at the last epoch. Once a tick finds no new request head since the previous one,
/// the timer is set at the deadline of the current wait instead (or at nothing, while one
/// long request is in flight), so an idle connection or a long stream costs no wake-ups.
pub(crate) struct HeadWatch<R: Runtime> {
    activity: Arc<ConnActivity<R>>,
    runtime: R,
    timeout: Duration,
    /// The last clock reading; at most [`TICK`] old while `ticking`.
    epoch: Instant,
    /// The timer is a tick (armed at `epoch + TICK`).
    ticking: bool,
    /// Heads counted when the current wait was last seen.
    seen_heads: usize,
    /// Heads counted at the last tick.
    tick_heads: usize,
    /// When the connection started waiting for the next head, while it does.
    waiting_since: Option<Instant>,
    /// The armed timer and the instant it fires at.
    armed: Option<(Instant, Pin<Box<R::Sleep>>)>,
    wake: Arc<TimerWake>,
    waker: Waker,
}

impl<R: Runtime> HeadWatch<R> {
    /// The watch over `activity`.
    pub(crate) fn new(activity: Arc<ConnActivity<R>>, runtime: R, timeout: Duration) -> Self {
        let wake = Arc::new(TimerWake::default());
        HeadWatch {
            activity,
            epoch: runtime.now(),
            runtime,
            timeout,
            ticking: false,
            seen_heads: 0,
            tick_heads: 0,
            waiting_since: None,
            armed: None,
            waker: Waker::from(Arc::clone(&wake)),
            wake,
        }
    }

    /// Call after the connection returned `Pending`. Returns `true` once the connection has
    /// waited for a request head for longer than the timeout: close it.
    #[inline(always)]
    pub(crate) fn after_pending(&mut self, cx: &mut Context<'_>) -> bool {
        // The common case under load: the timer ticks and has not fired yet; the tick looks
        // at the connection (a wait that started since the last look is dated at it).
        if self.ticking && !self.wake.fired.load(Ordering::Acquire) {
            return false;
        }
        self.look_now(cx)
    }

    /// The timer fired, or it does not tick: look at the connection unless nothing changed.
    #[cold]
    #[inline(never)]
    fn look_now(&mut self, cx: &mut Context<'_>) -> bool {
        if self.activity.http2.load(Ordering::Relaxed) {
            self.armed = None;
            self.ticking = false;
            return false;
        }
        let heads = self.activity.heads.load(Ordering::Relaxed);
        let busy = self.activity.ended.load(Ordering::Acquire) != heads;
        if busy && !self.ticking && self.waiting_since.is_none() && heads == self.tick_heads {
            // Still the one long request seen at the last look: nothing to time.
            return false;
        }
        self.look(cx, heads, busy)
    }

    /// Read the clock and decide what the timer is for next.
    fn look(&mut self, cx: &mut Context<'_>, heads: usize, busy: bool) -> bool {
        self.wake.fired.store(false, Ordering::Release);
        let now = self.runtime.now();
        // While ticking, a wait that started since the last look started after it; otherwise
        // every change was looked at as it happened.
        let since = if self.ticking { self.epoch } else { now };
        self.epoch = now;
        if busy {
            self.waiting_since = None;
        } else if self.waiting_since.is_none() || heads != self.seen_heads {
            self.seen_heads = heads;
            self.waiting_since = Some(since);
        }
        if heads != self.tick_heads {
            // Requests are arriving: tick.
            self.tick_heads = heads;
            self.ticking = true;
            return self.arm(cx, now + TICK, now);
        }
        self.ticking = false;
        match self.waiting_since {
            // One request in flight, for longer than a tick: nothing to time until it ends.
            None => {
                self.armed = None;
                false
            }
            Some(since) => self.arm(cx, since + self.timeout, now),
        }
    }

    /// Arms the timer at `at` (unless it is armed there already); `true` when `at` has passed.
    fn arm(&mut self, cx: &mut Context<'_>, at: Instant, now: Instant) -> bool {
        if at <= now {
            self.armed = None;
            return !self.ticking;
        }
        if matches!(&self.armed, Some((armed_at, _)) if *armed_at == at) {
            return false;
        }
        let mut sleep = Box::pin(self.runtime.sleep_until(at));
        self.wake.task.register(cx.waker());
        if sleep
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
            .is_ready()
        {
            // Already due on the runtime's clock: look again at once.
            self.armed = None;
            cx.waker().wake_by_ref();
            self.wake.fired.store(true, Ordering::Release);
            return false;
        }
        self.armed = Some((at, sleep));
        false
    }
}
