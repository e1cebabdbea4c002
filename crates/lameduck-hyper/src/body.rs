//! The response body the admission layer returns: the handler's body, tracked until it ends
//! (and, for long-running requests during the drain, held until its paced slot), or a canned
//! body of the lifecycle's own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use lameduck::gate::owned::{OwnedLongRunningTicket, OwnedNormalTicket};
use lameduck::StdClock;
use pin_project_lite::pin_project;

use crate::admission::RequestTracker;
use crate::runtime::Runtime;

/// A long-running ticket that an upgrade handler can take over; see
/// [`crate::take_upgrade_ticket`].
pub(crate) type TicketSlot = Arc<Mutex<Option<OwnedLongRunningTicket>>>;

/// What keeps a request counted in the gate until its body ends.
#[derive(Debug)]
pub(crate) enum Tracker {
    /// Held for its `Drop`, which releases the request.
    Normal(#[allow(dead_code)] OwnedNormalTicket),
    LongRunning(TicketSlot),
}

impl Tracker {
    /// The instant until which the end of a long-running body is held, if any.
    pub(crate) fn hold_until(
        &self,
        clock: &StdClock,
        now: std::time::Instant,
    ) -> Option<std::time::Instant> {
        match self {
            Tracker::Normal(_) => None,
            Tracker::LongRunning(slot) => {
                let guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
                let ticket = guard.as_ref()?;
                ticket
                    .reserve_release(clock.instant(now))
                    .map(|at| clock.to_std(at))
            }
        }
    }
}

pin_project! {
    /// The body of every response that passes through [`crate::AdmissionLayer`].
    pub struct LameduckBody<B, R: Runtime> {
        #[pin]
        state: BodyState<B, R>,
    }
}

pin_project! {
    #[project = BodyProj]
    enum BodyState<B, R: Runtime> {
        /// A response of the lifecycle's own (health, 429, 503, 504).
        Canned {
            data: Option<Bytes>,
        },
        /// The handler's body.
        Tracked {
            #[pin]
            inner: B,
            #[pin]
            end: BodyEnd<R>,
        },
    }
}

impl<B, R: Runtime> LameduckBody<B, R> {
    pub(crate) fn canned(data: Bytes) -> Self {
        LameduckBody {
            state: BodyState::Canned { data: Some(data) },
        }
    }

    pub(crate) fn tracked(
        inner: B,
        tracker: Option<RequestTracker>,
        runtime: R,
        clock: StdClock,
    ) -> Self {
        LameduckBody {
            state: BodyState::Tracked {
                inner,
                end: BodyEnd::new(tracker, runtime, clock),
            },
        }
    }
}

impl<B: fmt::Debug, R: Runtime> fmt::Debug for LameduckBody<B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            BodyState::Canned { data } => f.debug_struct("Canned").field("data", data).finish(),
            BodyState::Tracked { inner, .. } => {
                f.debug_struct("Tracked").field("inner", inner).finish()
            }
        }
    }
}

impl<B, R> Body for LameduckBody<B, R>
where
    B: Body<Data = Bytes>,
    R: Runtime,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().state.project() {
            BodyProj::Canned { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            BodyProj::Tracked { inner, end } => {
                if end.is_ending() {
                    ready!(end.poll_end(cx));
                    return Poll::Ready(None);
                }
                match ready!(inner.poll_frame(cx)) {
                    None => {
                        ready!(end.poll_end(cx));
                        Poll::Ready(None)
                    }
                    Some(Err(e)) => {
                        end.release();
                        Poll::Ready(Some(Err(e)))
                    }
                    frame => Poll::Ready(frame),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            BodyState::Canned { data } => data.is_none(),
            // A long-running body may still have to wait for its paced slot.
            BodyState::Tracked { end, .. } if end.is_long_running() => false,
            BodyState::Tracked { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            BodyState::Canned { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            BodyState::Tracked { inner, end } if end.is_long_running() => {
                // Never exact: the end may be held past the last byte.
                let mut hint = SizeHint::new();
                hint.set_lower(inner.size_hint().lower());
                hint
            }
            BodyState::Tracked { inner, .. } => inner.size_hint(),
        }
    }
}

pin_project! {
    /// The end of a tracked response body, for adapters that wrap bodies of their own (the
    /// actix adapter does): keeps the request counted until the handler's body has ended and,
    /// for a long-running request during the drain, until its paced slot.
    pub struct BodyEnd<R: Runtime> {
        tracker: Option<RequestTracker>,
        runtime: R,
        clock: StdClock,
        ending: bool,
        #[pin]
        hold: Option<R::Sleep>,
    }
}

impl<R: Runtime> fmt::Debug for BodyEnd<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyEnd")
            .field("tracked", &self.tracker.is_some())
            .field("ending", &self.ending)
            .finish()
    }
}

impl<R: Runtime> BodyEnd<R> {
    /// The end of a body admitted with `tracker`.
    #[must_use]
    pub fn new(tracker: Option<RequestTracker>, runtime: R, clock: StdClock) -> Self {
        BodyEnd {
            tracker,
            runtime,
            clock,
            ending: false,
            hold: None,
        }
    }

    /// Whether this is a long-running request's body (its end may be held).
    #[must_use]
    pub fn is_long_running(&self) -> bool {
        matches!(self.tracker, Some(RequestTracker(Tracker::LongRunning(_))))
    }

    /// Whether the handler's body has ended and its end is being held.
    #[must_use]
    pub fn is_ending(&self) -> bool {
        self.ending
    }

    /// Releases the request at once (the body failed).
    pub fn release(self: Pin<&mut Self>) {
        *self.project().tracker = None;
    }

    /// Call when the handler's body has ended, and again while it is pending: resolves
    /// (releasing the request) when the response body may end.
    pub fn poll_end(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        if !*this.ending {
            *this.ending = true;
            let now = this.runtime.now();
            if let Some(at) = this
                .tracker
                .as_ref()
                .and_then(|t| t.hold_until(this.clock, now))
            {
                this.hold.set(Some(this.runtime.sleep_until(at)));
            }
        }
        if let Some(sleep) = this.hold.as_mut().as_pin_mut() {
            ready!(sleep.poll(cx));
            this.hold.set(None);
        }
        *this.tracker = None;
        Poll::Ready(())
    }
}
