//! The response body of the admission middleware: the handler's body, counted until it
//! ends (a long-running one held until its paced turn), or a canned body of our own.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use bytes::Bytes;
use lameduck_hyper::adapter::{Deadline, RequestTracker};
use lameduck_hyper::{ResponseTimedOut, Runtime};
use lameduck_tokio::TokioRuntime;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of every response that passes through [`crate::AdmissionMiddleware`].
    pub struct LameduckBody<B> {
        #[pin]
        state: State<B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<B> {
        Canned { data: Option<Bytes> },
        Tracked {
            #[pin]
            inner: B,
            // Keeps the request counted; `None` once released.
            tracker: Option<RequestTracker>,
            // The request timeout, carried over from the response future (normal requests).
            deadline: Deadline<TokioRuntime>,
            // Long-running requests only: their end may be held until their paced turn.
            // Boxed: normal bodies stay small (the response moves a few times).
            hold: Option<Box<Hold>>,
        },
    }
}

/// The end of a long-running body, which may be held until its paced turn in the drain.
struct Hold {
    ending: bool,
    sleep: Option<Pin<Box<<TokioRuntime as Runtime>::Sleep>>>,
}

impl<B> LameduckBody<B> {
    pub(crate) fn canned(data: Bytes) -> Self {
        LameduckBody {
            state: State::Canned { data: Some(data) },
        }
    }

    /// The handler's body, counted by `tracker` until it ends (held until the paced turn if
    /// `long_running`), and aborted at `deadline`.
    #[inline]
    pub(crate) fn tracked(
        inner: B,
        tracker: Option<RequestTracker>,
        long_running: bool,
        deadline: Deadline<TokioRuntime>,
    ) -> Self {
        LameduckBody {
            state: State::Tracked {
                inner,
                tracker,
                deadline,
                hold: long_running.then(|| {
                    Box::new(Hold {
                        ending: false,
                        sleep: None,
                    })
                }),
            },
        }
    }
}

impl Hold {
    /// Called when the handler's body has ended, and again while pending: resolves when the
    /// long-running request's body may end (its paced turn during the drain).
    fn poll_end(&mut self, tracker: Option<&RequestTracker>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.ending {
            self.ending = true;
            let now = TokioRuntime.now();
            if let Some(at) = tracker.and_then(|t| t.hold_until(now)) {
                self.sleep = Some(Box::pin(TokioRuntime.sleep_until(at)));
            }
        }
        if let Some(sleep) = self.sleep.as_mut() {
            ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
        }
        Poll::Ready(())
    }
}

impl<B> MessageBody for LameduckBody<B>
where
    B: MessageBody,
{
    type Error = Box<dyn StdError>;

    fn size(&self) -> BodySize {
        match &self.state {
            State::Canned { data } => BodySize::Sized(data.as_ref().map_or(0, |d| d.len() as u64)),
            // A held end must not be skipped: a long-running body never claims to be empty.
            State::Tracked {
                inner,
                hold: Some(_),
                ..
            } => match inner.size() {
                BodySize::None => BodySize::Stream,
                size => size,
            },
            State::Tracked { inner, .. } => inner.size(),
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        match self.project().state.project() {
            StateProj::Canned { data } => Poll::Ready(data.take().map(Ok)),
            StateProj::Tracked {
                inner,
                tracker,
                deadline,
                hold,
            } => {
                if !hold.as_ref().is_some_and(|h| h.ending) {
                    match inner.poll_next(cx) {
                        Poll::Ready(Some(Ok(chunk))) => return Poll::Ready(Some(Ok(chunk))),
                        Poll::Ready(Some(Err(e))) => {
                            // The body failed: released at once.
                            *tracker = None;
                            return Poll::Ready(Some(Err(e.into())));
                        }
                        Poll::Ready(None) => {}
                        Poll::Pending => {
                            ready!(deadline.poll_expired(&TokioRuntime, cx));
                            // Past the request timeout: released; the error makes actix
                            // abort the response (HTTP/1: connection closed mid-body).
                            if let Some(tracker) = tracker.take() {
                                tracker.count_timeout();
                            }
                            return Poll::Ready(Some(Err(Box::new(ResponseTimedOut))));
                        }
                    }
                }
                if let Some(hold) = hold {
                    ready!(hold.poll_end(tracker.as_ref(), cx));
                }
                *tracker = None;
                Poll::Ready(None)
            }
        }
    }
}
