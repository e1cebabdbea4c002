//! Serving one connection: the user's tower service adapted to hyper, shut down gracefully
//! when the run loop says to stop listening, or (HTTP/2) when one of its own responses asks
//! to close the connection.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use event_listener::EventListener;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::body::LameduckBody;
use crate::conn_future::ConnResponseFuture;
use crate::context::ServeControl;
use crate::error::BoxError;
use crate::head_watch::{ConnActivity, HeadWatch, WatchedIo, HEADER_READ_TIMEOUT};
use crate::layer::AdmissionLayer;
use crate::logging;
use crate::runtime::{Exec, Runtime};
use crate::tracker::ConnectionGuard;

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

/// Serves one connection: every request is admitted by `admission` (which hands it to
/// `service` when it is to be served). Graceful shutdown (HTTP/1 `Connection: close` after
/// the current response, idle connections closed; HTTP/2 GOAWAY) starts when the run loop
/// broadcasts `StopListening` (the machine decides when: in mode A at
/// `NotAcceptingNewRequest`, in mode B after the drain), and for an HTTP/2 connection also
/// when one of its responses asks to close the connection (mode B's 429). An HTTP/1
/// connection waiting longer than [`HEADER_READ_TIMEOUT`] for a request head is closed.
/// `guard` is dropped when the connection ends.
pub(crate) fn serve_connection<R, I, S>(
    builder: &auto::Builder<Exec<R>>,
    admission: &AdmissionLayer<R>,
    io: I,
    peer: SocketAddr,
    service: S,
    control: Arc<ServeControl>,
    guard: ConnectionGuard,
) -> ServeConnection<R, I, S>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
{
    let runtime = admission.runtime.clone();
    let activity = Arc::new(ConnActivity::new(admission.clone()));
    let head_watch = HeadWatch::new(Arc::clone(&activity), runtime, HEADER_READ_TIMEOUT);
    let io = WatchedIo::new(io, Arc::clone(&activity));
    let svc = ConnService {
        service,
        activity: Arc::clone(&activity),
    };
    ServeConnection {
        conn: builder.serve_connection_with_upgrades(io, svc).into_owned(),
        control,
        stop_listener: None,
        registered: false,
        shutting_down: false,
        activity,
        head_watch,
        peer,
        _guard: guard,
    }
}

pin_project! {
    /// The task serving one connection (see [`serve_connection`]): one future, polled
    /// directly by the runtime, so a wake-up of the connection costs a few loads on top of
    /// hyper's own work.
    pub(crate) struct ServeConnection<R: Runtime, I, S: HttpService> {
        #[pin]
        conn: auto::UpgradeableConnection<'static, WatchedIo<I, R>, ConnService<S, R>, Exec<R>>,
        control: Arc<ServeControl>,
        // The stop broadcast wakes this task through one registration, made on the first
        // poll; after that, every wake-up costs an atomic load. (A task's waker stays the
        // same for its life, so one registration is enough.)
        stop_listener: Option<EventListener>,
        registered: bool,
        shutting_down: bool,
        // Its GOAWAY flag is set by this connection's own responses, inside `conn.poll`, so
        // it is checked after it.
        activity: Arc<ConnActivity<R>>,
        head_watch: HeadWatch<R>,
        peer: SocketAddr,
        _guard: ConnectionGuard,
    }
}

impl<R, I, S> Future for ServeConnection<R, I, S>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let result = loop {
            if !*this.shutting_down {
                let stop = if *this.registered {
                    this.control.stop.is_set()
                } else {
                    *this.registered = true;
                    this.control.stop.poll_register(this.stop_listener, cx)
                };
                if stop {
                    *this.shutting_down = true;
                    *this.stop_listener = None;
                    this.conn.as_mut().graceful_shutdown();
                }
            }
            if let Poll::Ready(result) = this.conn.as_mut().poll(cx) {
                break result;
            }
            if !*this.shutting_down && this.activity.goaway.is_set() {
                // One of this connection's responses asked to close it (HTTP/2: GOAWAY).
                *this.shutting_down = true;
                *this.stop_listener = None;
                this.conn.as_mut().graceful_shutdown();
                continue;
            }
            if this.head_watch.after_pending(cx) {
                // No request head within the timeout: close the connection.
                break Err(Box::new(HeadTimedOut) as BoxError);
            }
            return Poll::Pending;
        };
        if let Err(e) = result {
            logging::connection_error(*this.peer, &e);
        }
        Poll::Ready(())
    }
}

/// Why a connection was closed while it waited for a request head.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("no complete request head within {HEADER_READ_TIMEOUT:?}")]
struct HeadTimedOut;

/// The hyper service of one connection: hands each request, with a clone of the user's tower
/// service, to a response future that admits it and calls the service
/// ([`ConnResponseFuture`]); counts heads and responses for the header-read timeout; turns a `Connection: close`
/// response on HTTP/2 (which has no such header) into a GOAWAY for its connection, as Go's
/// HTTP/2 server does for kube-apiserver's 429s (see
/// [`InFlight::before_response`](crate::head_watch::InFlight::before_response)).
struct ConnService<S, R: Runtime> {
    service: S,
    activity: Arc<ConnActivity<R>>,
}

impl<S, R, ResBody> hyper::service::Service<Request<Incoming>> for ConnService<S, R>
where
    S: Service<Request<Incoming>, Response = Response<ResBody>> + Clone,
    R: Runtime,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<LameduckBody<ResBody, R>>;
    type Error = S::Error;
    type Future = ConnResponseFuture<S, S::Future, R>;

    /// Small enough for hyper's dispatcher to inline: admission happens on the response
    /// future's first poll, where the request already is.
    #[inline(always)]
    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.head_received();
        // A clone per request, as hyper-util's tower adapter makes (free for plain
        // functions, one reference count for a router).
        ConnResponseFuture::new(in_flight, self.service.clone(), req)
    }
}
