//! The response body of the admission middleware: the handler's body, counted until it
//! ends (a long-running one held until its paced slot), or a canned body of our own.

use std::error::Error as StdError;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use bytes::Bytes;
use lameduck_hyper::{BodyEnd, Deadline, RequestTracker, ResponseTimedOut};
use lameduck_tokio::TokioRuntime;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of every response that passes through [`crate::Admission`].
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
            #[pin]
            end: BodyEnd<TokioRuntime>,
        },
    }
}

impl<B> LameduckBody<B> {
    pub(crate) fn canned(data: Bytes) -> Self {
        LameduckBody {
            state: State::Canned { data: Some(data) },
        }
    }

    pub(crate) fn tracked(
        inner: B,
        tracker: Option<RequestTracker>,
        deadline: Deadline<TokioRuntime>,
    ) -> Self {
        LameduckBody {
            state: State::Tracked {
                inner,
                end: BodyEnd::new(tracker, TokioRuntime).with_deadline(deadline),
            },
        }
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
            State::Tracked { inner, end } if end.is_long_running() => match inner.size() {
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
            StateProj::Tracked { inner, mut end } => {
                if !end.is_ending() {
                    match inner.poll_next(cx) {
                        Poll::Ready(Some(Ok(chunk))) => return Poll::Ready(Some(Ok(chunk))),
                        Poll::Ready(Some(Err(e))) => {
                            end.release();
                            return Poll::Ready(Some(Err(e.into())));
                        }
                        Poll::Ready(None) => {}
                        Poll::Pending => {
                            ready!(end.as_mut().poll_deadline(cx));
                            // Past the request timeout: released; the error makes actix
                            // abort the response (HTTP/1: connection closed mid-body).
                            return Poll::Ready(Some(Err(Box::new(ResponseTimedOut))));
                        }
                    }
                }
                ready!(end.poll_end(cx));
                Poll::Ready(None)
            }
        }
    }
}
