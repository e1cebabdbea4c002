//! The per-connection service: adapts the user's tower service to hyper, and turns a
//! `Connection: close` response on HTTP/2 (which has no such header) into a GOAWAY for that
//! connection, as Go's HTTP/2 server does for kube-apiserver's 429s.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{header, Request, Response, Version};
use pin_project_lite::pin_project;
use tower::util::Oneshot;
use tower_service::Service;

use crate::flag::Flag;

/// hyper service over a cloneable tower service.
#[derive(Clone)]
pub(crate) struct ConnService<S> {
    inner: S,
    goaway: Arc<Flag>,
}

impl<S> ConnService<S> {
    pub(crate) fn new(inner: S, goaway: Arc<Flag>) -> Self {
        ConnService { inner, goaway }
    }
}

impl<S, ReqBody, ResBody> hyper::service::Service<Request<ReqBody>> for ConnService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ConnFuture<S, Request<ReqBody>>;

    fn call(&self, req: Request<ReqBody>) -> Self::Future {
        let http2 = req.version() == Version::HTTP_2;
        ConnFuture {
            inner: Oneshot::new(self.inner.clone(), req),
            goaway: http2.then(|| Arc::clone(&self.goaway)),
        }
    }
}

pin_project! {
    /// The response future of [`ConnService`].
    pub(crate) struct ConnFuture<S: Service<Req>, Req> {
        #[pin]
        inner: Oneshot<S, Req>,
        goaway: Option<Arc<Flag>>,
    }
}

impl<S, Req, ResBody> Future for ConnFuture<S, Req>
where
    S: Service<Req, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResBody>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = std::task::ready!(this.inner.poll(cx))?;
        if let Some(goaway) = this.goaway.take() {
            let close = response
                .headers()
                .get(header::CONNECTION)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            if close {
                response.headers_mut().remove(header::CONNECTION);
                goaway.set();
            }
        }
        Poll::Ready(Ok(response))
    }
}
