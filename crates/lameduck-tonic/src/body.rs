//! The response body of a gRPC call served through [`GrpcService`](crate::GrpcService):
//! the handler's body, ended with status OK when the server stops accepting if the call is
//! one the server ends itself.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use lameduck::LifecycleSignalFired;
use lameduck_hyper::ShutdownNotice;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a response that went through [`GrpcService`](crate::GrpcService).
    pub struct GrpcBody<B> {
        #[pin]
        inner: B,
        // Set for a call the server ends at `NotAcceptingNewRequest`.
        end: Option<Pin<Box<LifecycleSignalFired>>>,
        ended: bool,
    }
}

impl<B> GrpcBody<B> {
    pub(crate) fn new(inner: B, end: Option<ShutdownNotice>) -> Self {
        GrpcBody {
            inner,
            end: end.map(|s| Box::pin(s.wait())),
            ended: false,
        }
    }
}

impl<B> std::fmt::Debug for GrpcBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcBody")
            .field("ends_at_notice", &self.end.is_some())
            .finish_non_exhaustive()
    }
}

impl<B: Body<Data = Bytes>> Body for GrpcBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        if let Some(end) = this.end.as_mut() {
            // Between two frames (each holds whole messages): end the stream cleanly.
            if end.as_mut().poll(cx).is_ready() {
                *this.ended = true;
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", HeaderValue::from_static("0"));
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
        }
        this.inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.end.is_some() {
            let mut hint = SizeHint::new();
            hint.set_lower(self.inner.size_hint().lower());
            return hint;
        }
        self.inner.size_hint()
    }
}
