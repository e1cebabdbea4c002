//! The bound of a stopped connection: peers cannot hold a termination.
//!
//! Once a connection has said goodbye (HTTP/1 `Connection: close`, or closed when idle;
//! HTTP/2 the first GOAWAY and its PING), it holds the exit only while it carries work in
//! flight within that work's own bound. The core decides how long that is
//! ([`Shared::connection_bound`](lameduck::Shared::connection_bound)); [`Bound`] is the
//! connection task's side: it looks at the work in flight whenever it changes, keeps one
//! timer, and says when to act:
//!
//! - HTTP/2, [`SILENT_PEER_TIMEOUT`] after the first GOAWAY, when the client has not
//!   acknowledged its PING: the I/O acknowledges it in the client's stead
//!   ([`Http2Watch::force_ack`]), so that h2 sends the final GOAWAY (naming the streams
//!   opened so far) and closes the connection once they are done;
//! - at the bound: the connection is closed whatever the peer does, and counted
//!   ([`CutKind`]).
//!
//! A connection past its [maximum age](lameduck::Config::max_connection_age) says goodbye
//! the same way, on its own: its bound is then
//! [`Shared::aged_connection_bound`](lameduck::Shared::aged_connection_bound), until the
//! lifecycle stops it too (the earlier bound applies).
//!
//! Nothing here runs before the connection stops or ages: a connection that is serving has
//! no [`Bound`].
//!
//!
//! The work in flight is the requests whose response has not ended and, on HTTP/2, the
//! streams the server has not ended (a response h2 still holds for a client that stopped
//! reading: [`Http2Watch::open_streams`]).

use std::future::Future;
use std::pin::Pin;
use std::task::Context;

use lameduck::connection::{ConnectionWork, CutKind, SILENT_PEER_TIMEOUT};
use lameduck::Instant;

use crate::connection::context::ServeControl;
use crate::connection::h2_streams::Http2Watch;
use crate::connection::head_watch::ConnActivity;
use crate::runtime::Runtime;

/// What a stopped connection's task is to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoundStep {
    /// Nothing yet: the timer (or a request's end) wakes the task.
    Wait,
    /// HTTP/2: the client has not acknowledged the PING of the first GOAWAY within
    /// [`SILENT_PEER_TIMEOUT`]: acknowledge it in its stead, then poll the connection again.
    ForceFinalGoaway,
    /// The bound has passed: close the connection; it is counted as this kind.
    Cut(CutKind),
}

/// The work in flight as last seen: requests, long-running ones, the latest deadline of
/// those served after the gate closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    in_flight: usize,
    long_running: usize,
    late_until: Option<Instant>,
}

/// A stopped connection's bound (see the module's documentation).
pub(crate) struct Bound<R: Runtime> {
    /// When the lifecycle stopped the connection (its peer's time to take the goodbye
    /// starts then), once it did.
    stopped_at: Option<Instant>,
    /// When the connection reached its maximum age, if it did.
    aged_at: Option<Instant>,
    /// When the first GOAWAY went out (HTTP/2), once it did.
    goaway_at: Option<Instant>,
    /// Whether the task already acknowledged the PING in the client's stead.
    forced_final_goaway: bool,
    /// The PING was acknowledged in the client's stead: when the connection ends, it was cut,
    /// as this kind.
    cut_pending: Option<CutKind>,
    /// Its first GOAWAY came at the end of its wait for a first stream.
    waited_for_first_stream: bool,
    /// Since when nothing has been in flight, while nothing is.
    idle_since: Option<Instant>,
    /// The work in flight at the last look.
    seen: Option<Seen>,
    /// The armed timer and the instant it fires at.
    timer: Option<(Instant, Pin<Box<R::Sleep>>)>,
}

impl<R: Runtime> Bound<R> {
    /// The bound of a connection that stopped at `stopped_at` (on the lifecycle's clock).
    /// From now on, a request's end on it wakes its task.
    pub(crate) fn new(
        activity: &ConnActivity<R>,
        stopped_at: Instant,
        cx: &Context<'_>,
    ) -> Box<Self> {
        Self::with(activity, Some(stopped_at), None, cx)
    }

    /// The bound of a connection that reached its maximum age at `aged_at`.
    pub(crate) fn aged(
        activity: &ConnActivity<R>,
        aged_at: Instant,
        cx: &Context<'_>,
    ) -> Box<Self> {
        Self::with(activity, None, Some(aged_at), cx)
    }

    /// Whether the lifecycle has stopped the connection (not only its age).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped_at.is_some()
    }

    /// The lifecycle stopped the connection at `at`, after its age did.
    pub(crate) fn stopped(&mut self, at: Instant) {
        if self.stopped_at.is_none() {
            self.stopped_at = Some(at);
            self.seen = None;
        }
    }

    fn with(
        activity: &ConnActivity<R>,
        stopped_at: Option<Instant>,
        aged_at: Option<Instant>,
        cx: &Context<'_>,
    ) -> Box<Self> {
        activity.work.watch(cx.waker());
        // Idle at its stop: idle since then, however late its task saw it.
        let said_at = stopped_at.or(aged_at);
        let idle_since = said_at.filter(|_| activity.in_flight() == 0);
        Box::new(Bound {
            stopped_at,
            aged_at,
            goaway_at: None,
            forced_final_goaway: false,
            cut_pending: None,
            waited_for_first_stream: false,
            idle_since,
            seen: None,
            timer: None,
        })
    }

    /// The connection said its first GOAWAY now (HTTP/2).
    pub(crate) fn goodbye_said(&mut self, activity: &ConnActivity<R>) {
        if self.goaway_at.is_none() {
            self.goaway_at = Some(lifecycle_now(activity));
            // Re-arm for the final GOAWAY.
            self.seen = None;
        }
    }

    /// The connection said its first GOAWAY now, at the end of its wait for a first stream
    /// (it never carried one): closed right after at its bound, it is not counted as cut,
    /// as a plaintext connection that never carried a request is not.
    pub(crate) fn goodbye_said_after_waiting(&mut self, activity: &ConnActivity<R>) {
        self.goodbye_said(activity);
        self.waited_for_first_stream = true;
    }

    /// The connection ended by itself: the kind to count it as when the task had
    /// acknowledged the PING in the client's stead (the peer stayed silent for its second),
    /// unless it had just been told goodbye after waiting for a first stream.
    pub(crate) fn ended(&mut self) -> Option<CutKind> {
        let kind = self.cut_pending.take()?;
        (!self.waited_for_first_stream).then_some(kind)
    }

    /// Looks at the connection after it returned pending: what to do now. `http2` is what
    /// the I/O of an HTTP/2 connection sees of it.
    pub(crate) fn step(
        &mut self,
        cx: &mut Context<'_>,
        activity: &ConnActivity<R>,
        http2: Option<&Http2Watch>,
        control: &ServeControl,
    ) -> BoundStep {
        let work = &activity.work;
        let ack_read = http2.map(Http2Watch::ack_read);
        // A stream h2 still holds counts as a request in flight (a normal one: its
        // response has ended as far as the handler is concerned).
        let open_streams = http2.map_or(0, Http2Watch::open_streams);
        let seen = Seen {
            in_flight: activity.in_flight().max(open_streams),
            long_running: work.long_running(),
            late_until: work.late_until(),
        };
        let fired = self
            .timer
            .as_mut()
            .is_some_and(|(_, timer)| timer.as_mut().poll(cx).is_ready());
        if !fired && self.seen == Some(seen) {
            return BoundStep::Wait;
        }
        self.seen = Some(seen);
        let now = lifecycle_now(activity);
        let work = if seen.in_flight == 0 {
            ConnectionWork::Idle {
                since: *self.idle_since.get_or_insert(now),
            }
        } else {
            self.idle_since = None;
            ConnectionWork::Busy {
                normal: seen.in_flight > seen.long_running,
                long_running: seen.long_running > 0,
                late_until: seen.late_until,
            }
        };
        let shared = &activity.admission.shared;
        let stop_bound = self
            .stopped_at
            .and_then(|at| shared.connection_bound(at, work));
        let age_bound = self
            .aged_at
            .and_then(|at| shared.aged_connection_bound(at, work));
        let bound = earliest(stop_bound, age_bound);
        let force_at = match (ack_read, self.goaway_at) {
            (Some(false), Some(at)) if !self.forced_final_goaway => Some(at + SILENT_PEER_TIMEOUT),
            _ => None,
        };
        let passed = bound.is_some_and(|at| at <= now);
        let kind = match (seen.in_flight, ack_read) {
            (0, Some(_)) => CutKind::Http2Goaway,
            (0, None) => CutKind::RequestHead,
            // Work still in flight at the end of the age's grace.
            _ if age_bound.is_some_and(|at| at <= now) => CutKind::MaxConnectionAge,
            _ => CutKind::UnreadResponse,
        };
        control
            .bounds
            .set(registry_id(activity), bound.map(|at| (at, kind)));
        let force = force_at.is_some_and(|at| at <= now)
            || (passed && ack_read == Some(false) && !self.forced_final_goaway);
        if force {
            // Said in the final GOAWAY first, even when the connection is cut next. The peer
            // stayed silent for its second: should the connection end now (h2 closes it
            // once no stream is left), it was cut.
            self.forced_final_goaway = true;
            self.cut_pending = Some(if passed { kind } else { CutKind::Http2Goaway });
            self.seen = None;
            return BoundStep::ForceFinalGoaway;
        }
        if passed {
            return BoundStep::Cut(kind);
        }
        self.arm(cx, activity, earliest(bound, force_at));
        BoundStep::Wait
    }

    /// Arms the timer at `at` (unless it is armed there already), or disarms it.
    fn arm(&mut self, cx: &mut Context<'_>, activity: &ConnActivity<R>, at: Option<Instant>) {
        let Some(at) = at else {
            self.timer = None;
            return;
        };
        if matches!(&self.timer, Some((armed, _)) if *armed == at) {
            return;
        }
        let admission = &activity.admission;
        let mut timer = Box::pin(admission.runtime.sleep_until(admission.clock.to_std(at)));
        if timer.as_mut().poll(cx).is_ready() {
            // Due already on the runtime's clock: look again at once.
            cx.waker().wake_by_ref();
            self.seen = None;
        }
        self.timer = Some((at, timer));
    }
}

/// A connection's key in the [`BoundRegistry`](crate::connection::context::BoundRegistry):
/// the address of its activity, unique while the connection lives.
pub(crate) fn registry_id<R: Runtime>(activity: &ConnActivity<R>) -> usize {
    std::ptr::from_ref(activity) as usize
}

/// The earlier of two instants, either of which may be missing.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The lifecycle's clock, now.
pub(crate) fn lifecycle_now<R: Runtime>(activity: &ConnActivity<R>) -> Instant {
    let admission = &activity.admission;
    admission.clock.instant(admission.runtime.now())
}

/// The instant on the lifecycle's clock at which a connection that sees the stop now
/// stopped: the lifecycle's own stop, however late this task sees it.
pub(crate) fn stopped_at<R: Runtime>(activity: &ConnActivity<R>) -> Instant {
    let shared = &activity.admission.shared;
    shared.idle_close_window_start(lifecycle_now(activity))
}
