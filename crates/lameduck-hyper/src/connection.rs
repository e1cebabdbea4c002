//! Serving one connection: the user's tower service adapted to hyper, shut down gracefully
//! when the run loop says to stop listening, or (HTTP/2) when one of its own responses asks
//! to close the connection.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Request, Response, Version};
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use pin_project_lite::pin_project;
use tower::util::Oneshot;
use tower_service::Service;

use crate::context::ServeControl;
use crate::error::BoxError;
use crate::flag::Flag;
use crate::header_timer::header_timer;
use crate::logging;
use crate::runtime::{Exec, Runtime};

/// A service [`Server::serve`] can serve: a cloneable tower service from hyper requests to
/// responses with a `Bytes` body. Implemented for every such service.
///
/// [`Server::serve`]: crate::Server::serve
pub trait HttpService:
    Service<
        Request<Incoming>,
        Response = Response<Self::Body>,
        Error: Into<BoxError>,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
    /// The response body.
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
}

impl<S, B> HttpService for S
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Body = B;
}

/// Serves one connection. Graceful shutdown (HTTP/1 `Connection: close` after the current
/// response, idle connections closed; HTTP/2 GOAWAY) starts when the run loop broadcasts
/// `StopListening` (the machine decides when: in mode A at `NotAcceptingNewRequest`, in
/// mode B after the drain), and for an HTTP/2 connection also when one of its responses asks
/// to close the connection (mode B's 429).
pub(crate) async fn serve_connection<R, I, S>(
    builder: Arc<auto::Builder<Exec<R>>>,
    runtime: R,
    io: I,
    peer: SocketAddr,
    service: S,
    control: Arc<ServeControl>,
) where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
{
    let goaway = Arc::new(Flag::default());
    let svc = ConnService::new(service, Arc::clone(&goaway));
    // HTTP/1's header-read timeout through this connection's own slot and watchdog: no timer
    // operation per request (see `header_timer`).
    let (header_timer, mut watchdog) = header_timer(&runtime);
    let mut builder = (*builder).clone();
    builder.http1().timer(header_timer);
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, svc));
    // The stop broadcast wakes this task through one registration, made on the first poll;
    // after that, every wake-up of the connection costs two atomic loads, not a re-poll of
    // listener futures. (A task's waker stays the same for its life, so one registration
    // is enough.) The GOAWAY flag is set by this connection's own responses, inside
    // `conn.poll`, so it is checked after it.
    let mut stop_registration = pin!(control.stop.wait());
    let mut registered = false;
    let mut shutting_down = false;
    let result = poll_fn(|cx| loop {
        if !shutting_down {
            let stop = if registered {
                control.stop.is_set()
            } else {
                registered = true;
                stop_registration.as_mut().poll(cx).is_ready()
            };
            if stop || goaway.is_set() {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
        if let Poll::Ready(result) = conn.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        if !shutting_down && goaway.is_set() {
            // One of this connection's responses asked to close it (HTTP/2: GOAWAY).
            continue;
        }
        if watchdog.after_pending(cx) {
            // A request head is overdue: hyper's header sleep is ready now.
            continue;
        }
        return Poll::Pending;
    })
    .await;
    if let Err(e) = result {
        logging::connection_error(peer, &e);
    }
}

/// The hyper service of one connection, over a cloneable tower service: turns a
/// `Connection: close` response on HTTP/2 (which has no such header) into a GOAWAY for its
/// connection, as Go's HTTP/2 server does for kube-apiserver's 429s.
#[derive(Clone)]
struct ConnService<S> {
    inner: S,
    goaway: Arc<Flag>,
}

impl<S> ConnService<S> {
    fn new(inner: S, goaway: Arc<Flag>) -> Self {
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
    struct ConnFuture<S: Service<Req>, Req> {
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
        if this.goaway.is_none() {
            // HTTP/1: nothing to look at; pass the response through without a move.
            return this.inner.poll(cx);
        }
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
