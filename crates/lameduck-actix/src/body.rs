//! The response body of the admission middleware: the handler's body, counted until it
//! ends (a long-running one held until its paced slot), or a canned body of our own.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use bytes::Bytes;
use lameduck::StdClock;
use lameduck_hyper::{RequestTracker, Runtime};
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
            tracker: Option<RequestTracker>,
            clock: StdClock,
            #[pin]
            hold: Option<tokio::time::Sleep>,
        },
    }
}

impl<B> LameduckBody<B> {
    pub(crate) fn canned(data: Bytes) -> Self {
        LameduckBody {
            state: State::Canned { data: Some(data) },
        }
    }

    pub(crate) fn tracked(inner: B, tracker: Option<RequestTracker>, clock: StdClock) -> Self {
        LameduckBody {
            state: State::Tracked {
                inner,
                tracker,
                clock,
                hold: None,
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
            // A held end must not be skipped: never claim to be empty.
            State::Tracked {
                inner,
                tracker: Some(_),
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
                mut inner,
                tracker,
                clock,
                mut hold,
            } => loop {
                if let Some(sleep) = hold.as_mut().as_pin_mut() {
                    ready!(sleep.poll(cx));
                    hold.set(None);
                    *tracker = None;
                    return Poll::Ready(None);
                }
                match ready!(inner.as_mut().poll_next(cx)) {
                    Some(Ok(chunk)) => return Poll::Ready(Some(Ok(chunk))),
                    Some(Err(e)) => {
                        *tracker = None;
                        return Poll::Ready(Some(Err(e.into())));
                    }
                    None => {
                        let runtime = TokioRuntime;
                        match tracker
                            .as_ref()
                            .and_then(|t| t.hold_until(clock, runtime.now()))
                        {
                            Some(at) => hold.set(Some(runtime.sleep_until(at))),
                            None => {
                                *tracker = None;
                                return Poll::Ready(None);
                            }
                        }
                    }
                }
            },
        }
    }
}
