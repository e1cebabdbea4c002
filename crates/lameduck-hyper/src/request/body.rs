//! The response body the admission layer returns: the handler's body, tracked until it ends
//! (and, for long-running requests during the drain, held until its paced turn) and aborted
//! at the request timeout if it has not ended by then, or a canned body of the lifecycle's
//! own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::connection::head_watch::InFlight;
use crate::error::BoxError;
use crate::request::deadline::{Deadline, DeadlineState};
use crate::request::ticket::RequestTracker;
use crate::runtime::Runtime;

/// The error a normal response's body ends with when it has not ended by the request
/// timeout: hyper then aborts the response (HTTP/1: the connection is closed without the
/// final chunk; HTTP/2: the stream is reset), as kube-apiserver's timeout filter does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the response did not complete within the request timeout")]
pub struct ResponseTimedOut;

/// A data frame at least this long makes the body's end wait for the transport: see
/// [`LameduckBody::is_end_stream`].
const LARGE_CHUNK: usize = 16 * 1024;

pin_project! {
    /// The body of every response that passes through [`crate::AdmissionLayer`].
    pub struct LameduckBody<B, R: Runtime> {
        #[pin]
        state: BodyState<B, R>,
        // The connection is busy with this request until its response body is dropped.
        in_flight: Option<InFlight<R>>,
        // The last frame was a large chunk: the end is told only when polled again.
        after_large_chunk: bool,
    }
}

pin_project! {
    #[project = BodyProj]
    enum BodyState<B, R: Runtime> {
        /// A response of the lifecycle's own (health, 429, 503, 504); a health answer stays
        /// tracked until the body is done.
        Canned {
            data: Option<Bytes>,
            tracker: Option<RequestTracker>,
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

/// A body of the lifecycle's own (a canned or health response), untracked.
impl<B, R: Runtime> From<Bytes> for LameduckBody<B, R> {
    fn from(data: Bytes) -> Self {
        Self::canned_tracked(data, None)
    }
}

impl<B, R: Runtime> LameduckBody<B, R> {
    pub(crate) fn canned_tracked(data: Bytes, tracker: Option<RequestTracker>) -> Self {
        LameduckBody {
            state: BodyState::Canned {
                data: Some(data),
                tracker,
            },
            in_flight: None,
            after_large_chunk: false,
        }
    }

    /// The handler's `inner` body, ended by `end`; holds `in_flight` until it is dropped.
    #[inline]
    pub(crate) fn tracked_with(inner: B, end: BodyEnd<R>, in_flight: Option<InFlight<R>>) -> Self {
        LameduckBody {
            state: BodyState::Tracked { inner, end },
            in_flight,
            after_large_chunk: false,
        }
    }

    /// Holds `in_flight` until the body is dropped.
    pub(crate) fn in_flight(mut self, in_flight: Option<InFlight<R>>) -> Self {
        self.in_flight = in_flight;
        self
    }
}

impl<B: fmt::Debug, R: Runtime> fmt::Debug for LameduckBody<B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            BodyState::Canned { data, .. } => f.debug_struct("Canned").field("data", data).finish(),
            BodyState::Tracked { inner, .. } => {
                f.debug_struct("Tracked").field("inner", inner).finish()
            }
        }
    }
}

impl<B, R> Body for LameduckBody<B, R>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
    R: Runtime,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        *this.after_large_chunk = false;
        match this.state.project() {
            BodyProj::Canned { data, tracker } => {
                let frame = data.take().map(|d| Ok(Frame::data(d)));
                if frame.is_none() {
                    *tracker = None;
                }
                Poll::Ready(frame)
            }
            BodyProj::Tracked { inner, mut end } => {
                if end.is_ending() {
                    // The end is held; with the trailers, if they were its last frame.
                    let trailers = ready!(end.poll_end_trailers(cx));
                    return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                }
                match inner.poll_frame(cx) {
                    Poll::Ready(None) => {
                        ready!(end.poll_end(cx));
                        Poll::Ready(None)
                    }
                    Poll::Ready(Some(Err(e))) => {
                        end.release();
                        Poll::Ready(Some(Err(e.into())))
                    }
                    Poll::Ready(Some(Ok(frame))) => {
                        if frame.is_trailers() && end.is_long_running() {
                            // Trailers end the stream (a gRPC status): they wait for the
                            // paced turn, as the end of the body would.
                            if let Ok(trailers) = frame.into_trailers() {
                                let trailers = ready!(end.hold_trailers(trailers, cx));
                                return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                            }
                            return Poll::Ready(None);
                        }
                        if frame.data_ref().is_some_and(|d| d.len() >= LARGE_CHUNK) {
                            *this.after_large_chunk = true;
                        }
                        Poll::Ready(Some(Ok(frame)))
                    }
                    Poll::Pending => {
                        ready!(end.as_mut().poll_deadline(cx));
                        // Past the request timeout: released; the error aborts the response.
                        Poll::Ready(Some(Err(ResponseTimedOut.into())))
                    }
                }
            }
        }
    }

    /// The end of the stream, as the handler's body says, except right after a large data
    /// chunk: the server then polls once more for the end, which it does only once the
    /// transport has taken the chunk (HTTP/2: the client's flow-control window let it out;
    /// HTTP/1: the write buffer has room again). Until then the request stays in flight, so
    /// a client that stopped reading a large response keeps it counted, and bounded, as work
    /// in flight ([`lameduck::Shared::connection_bound`]) instead of leaving the connection
    /// looking idle with the chunk still queued.
    fn is_end_stream(&self) -> bool {
        if self.after_large_chunk {
            return false;
        }
        match &self.state {
            // An empty canned body (a gRPC trailers-only answer) ends with its head.
            BodyState::Canned { data, .. } => data.as_ref().is_none_or(Bytes::is_empty),
            // A long-running body may still have to wait for its paced turn.
            BodyState::Tracked { end, .. } if end.is_long_running() => false,
            BodyState::Tracked { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            BodyState::Canned { data, .. } => {
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

/// The end of a tracked response body, for adapters that wrap bodies of their own (the
/// actix adapter does): keeps the request counted until the handler's body has ended and,
/// for a long-running request during the drain, until its paced turn; and, for a normal
/// request, ends it at the request timeout ([`BodyEnd::poll_deadline`]).
///
/// Small (a ticket and one timer) and `Unpin`: its timer is boxed and created only when a
/// body has to wait. A normal request's timer is its request timeout, armed the first time
/// the request waits; a long-running request's timer holds its end until its paced turn.
pub struct BodyEnd<R: Runtime> {
    tracker: Option<RequestTracker>,
    timer: Option<Pin<Box<R::Sleep>>>,
    runtime: R,
}

// Nothing in a `BodyEnd` is ever pinned in place: its timer is boxed.
impl<R: Runtime> Unpin for BodyEnd<R> {}

impl<R: Runtime> fmt::Debug for BodyEnd<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyEnd")
            .field("tracked", &self.tracker.is_some())
            .field("long_running", &self.is_long_running())
            .field("timer", &self.timer.is_some())
            .finish()
    }
}

impl<R: Runtime> BodyEnd<R> {
    /// The end of a body admitted with `tracker`. A normal request is bounded by the
    /// lifecycle's request timeout (if it is not zero), counted from its first wait.
    #[must_use]
    pub fn new(tracker: Option<RequestTracker>, runtime: R) -> Self {
        BodyEnd {
            tracker,
            timer: None,
            runtime,
        }
    }

    /// Carries over `deadline` (the request timeout of a response future that already had
    /// to wait), so that it bounds the whole response.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Deadline<R>) -> Self {
        match deadline.into_state() {
            DeadlineState::Unarmed => {}
            DeadlineState::Armed(timer) => self.timer = Some(timer),
            DeadlineState::Expired => self.tracker = None,
        }
        self
    }

    /// Sets the tracker of an end made before admission decided (still untracked then).
    #[inline]
    pub(crate) fn set_tracker(&mut self, tracker: Option<RequestTracker>) {
        // Dropped only if there was one: no drop call on the common path.
        if let Some(earlier) = std::mem::replace(&mut self.tracker, tracker) {
            drop(earlier);
        }
    }

    /// Moves the end out, leaving an untracked one.
    pub(crate) fn take(&mut self) -> Self {
        BodyEnd {
            tracker: self.tracker.take(),
            timer: self.timer.take(),
            runtime: self.runtime.clone(),
        }
    }

    /// Releases the request (and its timer) at once.
    pub(crate) fn clear(&mut self) {
        self.tracker = None;
        self.timer = None;
    }

    /// The lifecycle's shared state, while the request is tracked.
    pub(crate) fn shared(&self) -> Option<std::sync::Arc<lameduck::Shared>> {
        self.tracker.as_ref().and_then(RequestTracker::shared)
    }

    /// Call whenever the handler or its body is pending: resolves once a normal request's
    /// timeout has passed, releasing the request; the adapter then answers 504 or aborts the
    /// response. Pending forever without a timeout. The timer is only armed the first time
    /// the request waits, so requests that never wait cost nothing.
    pub fn poll_deadline(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(tracker) = &this.tracker else {
            return Poll::Pending;
        };
        let timer = match &mut this.timer {
            Some(timer) => timer,
            None => {
                let Some(timeout) = tracker.request_timeout() else {
                    return Poll::Pending;
                };
                let at = this.runtime.now() + timeout;
                this.timer.insert(Box::pin(this.runtime.sleep_until(at)))
            }
        };
        ready!(timer.as_mut().poll(cx));
        if let Some(tracker) = &this.tracker {
            tracker.count_timeout();
        }
        this.clear();
        Poll::Ready(())
    }

    /// A long-running body's last frame was `trailers`: holds them until the paced turn
    /// (as [`BodyEnd::poll_end`] holds the end), then resolves with them.
    pub(crate) fn hold_trailers(
        self: Pin<&mut Self>,
        trailers: http::HeaderMap,
        cx: &mut Context<'_>,
    ) -> Poll<Option<http::HeaderMap>> {
        let this = self.get_mut();
        let given_back = match &this.tracker {
            Some(tracker) => tracker.hold_trailers(trailers),
            None => Some(trailers),
        };
        if given_back.is_some() {
            ready!(Pin::new(&mut *this).poll_end(cx));
            return Poll::Ready(given_back);
        }
        Pin::new(this).poll_end_trailers(cx)
    }

    /// [`BodyEnd::poll_end`], then the trailers held by [`BodyEnd::hold_trailers`], if any.
    pub(crate) fn poll_end_trailers(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<http::HeaderMap>> {
        let this = self.get_mut();
        if this.is_long_running() {
            if this.timer.is_none() {
                let now = this.runtime.now();
                if let Some(at) = this.tracker.as_ref().and_then(|t| t.hold_until(now)) {
                    this.timer = Some(Box::pin(this.runtime.sleep_until(at)));
                }
            }
            if let Some(timer) = this.timer.as_mut() {
                ready!(timer.as_mut().poll(cx));
            }
        }
        let trailers = this
            .tracker
            .as_ref()
            .and_then(RequestTracker::take_trailers);
        this.clear();
        Poll::Ready(trailers)
    }

    /// Whether this is a long-running request's body (its end may be held).
    #[must_use]
    pub fn is_long_running(&self) -> bool {
        self.tracker
            .as_ref()
            .is_some_and(RequestTracker::is_long_running)
    }

    /// Whether the handler's body has ended and its end is being held.
    #[must_use]
    pub fn is_ending(&self) -> bool {
        self.timer.is_some() && self.is_long_running()
    }

    /// Releases the request at once (the body failed).
    pub fn release(self: Pin<&mut Self>) {
        self.get_mut().clear();
    }

    /// Call when the handler's body has ended, and again while it is pending: resolves
    /// (releasing the request) when the response body may end.
    pub fn poll_end(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.is_long_running() {
            if this.timer.is_none() {
                // Only a long-running body can be held (its paced turn): read the clock for it.
                let now = this.runtime.now();
                match this.tracker.as_ref().and_then(|t| t.hold_until(now)) {
                    Some(at) => this.timer = Some(Box::pin(this.runtime.sleep_until(at))),
                    None => {
                        this.clear();
                        return Poll::Ready(());
                    }
                }
            }
            if let Some(timer) = this.timer.as_mut() {
                ready!(timer.as_mut().poll(cx));
            }
        }
        this.clear();
        Poll::Ready(())
    }
}
