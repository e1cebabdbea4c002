//! The stop of a connection that may be about to carry a request. Closing it at once races
//! the request its client may be sending at that moment, which then fails without an answer
//! (a reset, or the end of the stream under the request). So a connection that has carried no
//! request yet, and, when the sockets outlive the process, a keep-alive one (idle, or busy
//! with a response that may already have gone out without `Connection: close`), stays open
//! until [`Shared::idle_close_at`](lameduck::Shared::idle_close_at): a request that arrives
//! meanwhile is answered and the connection closed after it; otherwise it is closed then
//! (after the response in progress, if any).
//!
//! With the idle-close spread ([`Config::idle_close_spread`](lameduck::Config::idle_close_spread))
//! every connection that is not busy with an HTTP/1 request waits the same way, until its own
//! random point of the window ([`spread_close_at`]), so that the clients of a server's idle
//! connections do not all reconnect at the same instant.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use lameduck::{Instant, Shared};

use crate::connection::head_watch::ConnActivity;
use crate::request::goaway;
use crate::runtime::Runtime;

/// When a connection that a server stopping at `now` ends: closes it (HTTP/1) or says
/// GOAWAY (HTTP/2). `waits` is `Some(first)` for a connection that waits for a request
/// (`first`: none has come yet), `None` for one that would end at once without the spread;
/// `window_start` is when the server told its connections to end. With the [idle-close
/// spread](lameduck::Config::idle_close_spread) on, the connection's point in the window is
/// drawn from this thread's generator (the one behind the goaway chance: a few arithmetic
/// instructions, no system call); see [`Shared::spread_close_at`]. For adapters that end
/// their connections themselves (actix-web).
#[must_use]
pub fn spread_close_at(
    shared: &Shared,
    waits: Option<bool>,
    window_start: Instant,
    now: Instant,
) -> Instant {
    if shared.config().idle_close_spread().is_zero() {
        return waits.map_or(now, |first| shared.idle_close_at(first, now));
    }
    shared.spread_close_at(waits, window_start, now, goaway::next_u32())
}

/// A stopped connection kept open for its next request: until a request head (an HTTP/2
/// stream) arrives, or the timer fires.
pub(crate) struct Linger<R: Runtime> {
    heads_at_stop: usize,
    timer: Pin<Box<R::Sleep>>,
    /// The connection's own point in the idle-close window, when the spread put it there:
    /// its goodbye comes then, and its peer's time to take it starts then.
    pub(crate) spread_point: Option<Instant>,
}

impl<R: Runtime> Linger<R> {
    /// The linger of a connection stopped now: `waits` as [`spread_close_at`]'s, `spread`
    /// when the connection takes its point in the idle-close window (it is not busy with an
    /// HTTP/1 request, which ends after its response); `None` when it is to be shut down at
    /// once.
    pub(crate) fn at_stop(
        activity: &ConnActivity<R>,
        waits: Option<bool>,
        spread: bool,
    ) -> Option<Box<Self>> {
        let admission = &activity.admission;
        let (runtime, clock, shared) = (&admission.runtime, admission.clock, &admission.shared);
        let now = runtime.now();
        let at = clock.instant(now);
        let spreading = spread && !shared.config().idle_close_spread().is_zero();
        let until = if spread {
            // Measured from the lifecycle's stop, however late this task sees it.
            spread_close_at(shared, waits, shared.idle_close_window_start(at), at)
        } else {
            waits.map_or(at, |first| shared.idle_close_at(first, at))
        };
        let spread_point = spreading.then_some(until);
        let until = clock.to_std(until);
        (until > now).then(|| {
            Box::new(Linger {
                heads_at_stop: activity.heads(),
                timer: Box::pin(runtime.sleep_until(until)),
                spread_point,
            })
        })
    }

    /// Whether the wait is over: a request came (on HTTP/2, its GOAWAY then lets in the
    /// streams that race it), or the time is up
    /// (otherwise the timer wakes the task).
    pub(crate) fn is_over(&mut self, cx: &mut Context<'_>, activity: &ConnActivity<R>) -> bool {
        activity.heads() != self.heads_at_stop
            || matches!(self.timer.as_mut().poll(cx), Poll::Ready(()))
    }
}
