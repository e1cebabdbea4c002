//! The stop of a connection that may be about to carry a request. Closing it at once races
//! the request its client may be sending at that moment, which then fails without an answer
//! (a reset, or the end of the stream under the request). So a connection that has carried no
//! request yet, and, when the sockets outlive the process, a keep-alive one (idle, or busy
//! with a response that may already have gone out without `Connection: close`), stays open
//! until [`Shared::idle_close_at`](lameduck::Shared::idle_close_at): a request that arrives
//! meanwhile is answered and the connection closed after it; otherwise it is closed then
//! (after the response in progress, if any).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::connection::head_watch::ConnActivity;
use crate::runtime::Runtime;

/// A stopped connection kept open for its next request: until a request head (an HTTP/2
/// stream) arrives, or the timer fires.
pub(crate) struct Linger<R: Runtime> {
    heads_at_stop: usize,
    timer: Pin<Box<R::Sleep>>,
}

impl<R: Runtime> Linger<R> {
    /// The linger of a connection stopped now, waiting for its first request (`first`) or
    /// its next one; `None` when it is to be shut down at once.
    pub(crate) fn at_stop(activity: &ConnActivity<R>, first: bool) -> Option<Box<Self>> {
        let admission = &activity.admission;
        let (runtime, clock) = (&admission.runtime, admission.clock);
        let now = runtime.now();
        let until = admission.shared.idle_close_at(first, clock.instant(now));
        let until = clock.to_std(until);
        (until > now).then(|| {
            Box::new(Linger {
                heads_at_stop: activity.heads(),
                timer: Box::pin(runtime.sleep_until(until)),
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
