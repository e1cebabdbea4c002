//! Serving one connection: the user's tower service adapted to hyper, shut down gracefully
//! when the run loop says to stop listening, or (HTTP/2) when one of its own responses asks
//! to close the connection.

pub(crate) mod accept;
pub(crate) mod age;
pub(crate) mod bound;
pub(crate) mod context;
pub(crate) mod h2_io;
pub(crate) mod h2_streams;
pub(crate) mod handshake;
pub(crate) mod head_watch;
pub(crate) mod linger;
pub(crate) mod preface;
pub(crate) mod response_future;
pub(crate) mod tracker;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use event_listener::EventListener;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use pin_project_lite::pin_project;
use tower_service::Service;

use lameduck::connection::CutKind;

use crate::connection::age::Age;
use crate::connection::bound::{Bound, BoundStep};
use crate::connection::context::ServeControl;
use crate::connection::h2_io::Http2Io;
use crate::connection::h2_streams::Http2Watch;
use crate::connection::head_watch::{ConnActivity, HeadWatch, HEADER_READ_TIMEOUT};
use crate::connection::linger::Linger;
use crate::connection::preface::{ConnIo, Protocol};
use crate::connection::response_future::{ConnService, RequestSlot};
use crate::connection::tracker::ConnectionGuard;
use crate::error::BoxError;
use crate::logging;
use crate::request::layer::AdmissionLayer;
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

/// A connection to serve, as accepted (and, over TLS, after its handshake): what
/// [`serve_connection`] takes besides the admission layer.
pub(crate) struct NewConnection<I, S> {
    /// The connection's I/O.
    pub(crate) io: I,
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// A clone of the user's service.
    pub(crate) service: S,
    /// The listener's stop broadcast.
    pub(crate) control: Arc<ServeControl>,
    /// Dropped when the connection ends.
    pub(crate) guard: ConnectionGuard,
    /// What a handshake said the connection speaks (TLS ALPN); `None`: the first bytes tell.
    pub(crate) protocol: Option<Protocol>,
}

/// Serves one connection: every request is admitted by `admission` (which hands it to `service`
/// when it is to be served). The connection speaks HTTP/1 or, if it starts with the client preface,
/// HTTP/2. Graceful shutdown (HTTP/1 `Connection: close` after the current response, idle
/// connections closed, those that may be about to carry a request once it came or a short wait
/// passed (see [`Linger`]); HTTP/2 GOAWAY) starts when the run loop broadcasts `StopListening` (the
/// machine decides when: in close-listener mode at `NotAcceptingNewRequest`, in retry-after mode
/// after the drain), and for an HTTP/2 connection also when one of its responses asks to close the
/// connection (retry-after mode's 429). With the idle-close spread on, a connection that is not
/// busy with an HTTP/1 request ends at its own random point of the window instead (see
/// [`Linger`]), or sooner when a request comes on it. An HTTP/1 connection waiting longer than
/// [`HEADER_READ_TIMEOUT`] for a request head is closed.
pub(crate) fn serve_connection<R, I, S, Q>(
    admission: &AdmissionLayer<R>,
    new: NewConnection<I, S>,
) -> ServeConnection<R, I, S, Q>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
    Q: RequestSlot,
{
    let runtime = admission.runtime.clone();
    let activity = Arc::new(ConnActivity::new(admission.clone()));
    let head_watch = HeadWatch::new(Arc::clone(&activity), runtime, HEADER_READ_TIMEOUT);
    let svc = ConnService::new(new.service, Arc::clone(&activity));
    let io = ConnIo::new(new.io);
    let conn = match new.protocol {
        None => HttpConnection::Detecting {
            io: Some(io),
            service: Some(svc),
        },
        Some(protocol) => HttpConnection::speaking(protocol, io, svc, &activity),
    };
    ServeConnection {
        conn,
        control: new.control,
        stop_listener: None,
        registered: false,
        shutting_down: false,
        linger: None,
        bound: None,
        age: Age::drawn(admission),
        activity,
        head_watch,
        peer: new.peer,
        _guard: new.guard,
    }
}

/// What one poll of a connection gave.
enum Polled {
    /// The connection has ended.
    Done(Result<(), BoxError>),
    /// Pending.
    Pending,
    /// Pending, and the connection speaks HTTP/2 (whose responses may ask for a GOAWAY).
    PendingHttp2,
}

pin_project! {
    /// hyper's connection, once the protocol is known.
    #[project = HttpConnectionProj]
    enum HttpConnection<R: Runtime, I, S: HttpService, Q: RequestSlot> {
        /// Reading the first bytes, which tell the protocol.
        Detecting {
            io: Option<ConnIo<I>>,
            service: Option<ConnService<S, R, Q>>,
        },
        /// HTTP/1, with upgrades (WebSocket).
        Http1 {
            #[pin]
            conn: http1::UpgradeableConnection<ConnIo<I>, ConnService<S, R, Q>>,
        },
        /// HTTP/2 with prior knowledge.
        Http2 {
            #[pin]
            conn: http2::Connection<Http2Io<ConnIo<I>>, ConnService<S, R, Q>, Exec<R>>,
            // Shared with its I/O: its open streams, the shutdown PING's acknowledgement.
            watch: Arc<Http2Watch>,
        },
    }
}

impl<R, I, S, Q> HttpConnection<R, I, S, Q>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
    Q: RequestSlot,
{
    /// Drives the connection; tells `activity` when it turns out to be HTTP/2.
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>, activity: &ConnActivity<R>) -> Polled {
        loop {
            let result = match self.as_mut().project() {
                HttpConnectionProj::Http1 { conn } => conn.poll(cx),
                HttpConnectionProj::Http2 { conn, .. } => match conn.poll(cx) {
                    Poll::Ready(result) => Poll::Ready(result),
                    Poll::Pending => return Polled::PendingHttp2,
                },
                HttpConnectionProj::Detecting { .. } => {
                    match self.as_mut().poll_detect(cx, activity) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => return Polled::Done(Err(e)),
                        Poll::Pending => return Polled::Pending,
                    }
                }
            };
            return match result {
                Poll::Ready(result) => Polled::Done(result.map_err(Into::into)),
                Poll::Pending => Polled::Pending,
            };
        }
    }

    /// Reads the first bytes; once they tell the protocol, becomes hyper's connection for it.
    #[cold]
    #[inline(never)]
    fn poll_detect(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        activity: &ConnActivity<R>,
    ) -> Poll<Result<(), BoxError>> {
        let HttpConnectionProj::Detecting { io, service } = self.as_mut().project() else {
            return Poll::Ready(Ok(()));
        };
        let (Some(conn_io), Some(_)) = (io.as_mut(), service.as_ref()) else {
            return Poll::Ready(Err("connection polled after its protocol failed".into()));
        };
        let protocol = std::task::ready!(conn_io.poll_protocol(cx))?;
        let (Some(io), Some(service)) = (io.take(), service.take()) else {
            return Poll::Ready(Err("connection polled after its protocol failed".into()));
        };
        self.set(Self::speaking(protocol, io, service, activity));
        Poll::Ready(Ok(()))
    }

    /// hyper's connection for `protocol`.
    fn speaking(
        protocol: Protocol,
        io: ConnIo<I>,
        service: ConnService<S, R, Q>,
        activity: &ConnActivity<R>,
    ) -> Self {
        match protocol {
            Protocol::Http1 => HttpConnection::Http1 {
                conn: http1::Builder::new()
                    .serve_connection(io, service)
                    .with_upgrades(),
            },
            Protocol::Http2 => {
                activity.set_http2();
                let runtime = &activity.admission.runtime;
                let mut builder = http2::Builder::new(Exec(runtime.clone()));
                // For HTTP/2's keep-alive pings, if configured. HTTP/1 gets no timer: its
                // header-read timeout is kept by the connection's task, at less cost.
                builder.timer(runtime.hyper_timer());
                let watch = Arc::new(Http2Watch::default());
                let io = Http2Io::new(io, Arc::clone(&watch));
                HttpConnection::Http2 {
                    conn: builder.serve_connection(io, service),
                    watch,
                }
            }
        }
    }

    /// Starts a graceful shutdown at the stop broadcast, once what the connection has received
    /// already is read: a request (or HTTP/2's preface) that arrived with the goodbye is
    /// answered, and the goodbye said (`Connection: close`, GOAWAY), instead of the connection
    /// being closed under it. `Some` when the connection has ended. (Out of line: the
    /// connection's poll, which runs at every wake-up, keeps one copy of hyper's.)
    #[cold]
    #[inline(never)]
    fn shut_down(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        activity: &ConnActivity<R>,
    ) -> Option<Result<(), BoxError>> {
        if let Polled::Done(result) = self.as_mut().poll(cx, activity) {
            return Some(result);
        }
        if !self.graceful_shutdown() {
            return Some(Ok(()));
        }
        None
    }

    /// At the stop: whether the connection may be about to carry a request, and whether it
    /// would be its first (`Some(true)`: none has come yet); `None` for an HTTP/2 connection
    /// that has carried a stream, whose two-step GOAWAY lets in the streams that race it.
    ///
    /// An HTTP/1 connection busy with a request counts as one about to carry the next: its
    /// response may already be on its way without `Connection: close`, and its client will
    /// then send the next request on it. An HTTP/2 connection that has carried no stream was
    /// just opened by a client about to send one: it waits for that stream like a new HTTP/1
    /// connection, and says GOAWAY after it. [`Linger`] decides how long each waits.
    fn waits_for_request(&self, activity: &ConnActivity<R>) -> Option<bool> {
        match self {
            HttpConnection::Detecting { .. } => Some(true),
            HttpConnection::Http1 { .. } => Some(activity.heads() == 0),
            HttpConnection::Http2 { .. } => (activity.heads() == 0).then_some(true),
        }
    }

    /// At the stop: whether the connection takes its point in the idle-close spread
    /// ([`Linger::at_stop`]). Every one does but an HTTP/1 connection busy with a request,
    /// which ends after its response, as without the spread.
    fn spreads_close(&self, activity: &ConnActivity<R>) -> bool {
        match self {
            HttpConnection::Detecting { .. } | HttpConnection::Http2 { .. } => true,
            HttpConnection::Http1 { .. } => activity.is_idle(),
        }
    }

    /// Starts a graceful shutdown; `false` when there is nothing to shut down gracefully
    /// (the protocol is not known yet: no request has been read), so the connection ends now.
    fn graceful_shutdown(self: Pin<&mut Self>) -> bool {
        match self.project() {
            HttpConnectionProj::Detecting { .. } => false,
            HttpConnectionProj::Http1 { conn } => {
                conn.graceful_shutdown();
                true
            }
            HttpConnectionProj::Http2 { conn, .. } => {
                conn.graceful_shutdown();
                true
            }
        }
    }

    /// HTTP/2: what its I/O sees of it; `None` for another protocol.
    fn http2_watch(&self) -> Option<&Http2Watch> {
        match self {
            HttpConnection::Http2 { watch, .. } => Some(watch),
            _ => None,
        }
    }
}

pin_project! {
    /// The task serving one connection (see [`serve_connection`]): one future, polled
    /// directly by the runtime, so a wake-up of the connection costs a few loads on top of
    /// hyper's own work.
    pub(crate) struct ServeConnection<R: Runtime, I, S: HttpService, Q: RequestSlot> {
        #[pin]
        conn: HttpConnection<R, I, S, Q>,
        control: Arc<ServeControl>,
        // The stop broadcast wakes this task through one registration, made on the first
        // poll; after that, every wake-up costs an atomic load. (A task's waker stays the
        // same for its life, so one registration is enough.)
        stop_listener: Option<EventListener>,
        registered: bool,
        shutting_down: bool,
        // Stopped, and kept open for the request it waits for (see `linger`).
        linger: Option<Box<Linger<R>>>,
        // Stopped (or aged): how long it may stay whatever its peer does (see `bound`).
        bound: Option<Box<Bound<R>>>,
        // Its maximum age, until it is reached (see `age`; `None` when the age is off).
        age: Option<Box<Age<R>>>,
        // Its GOAWAY flag is set by this connection's own responses, inside `conn.poll`, so
        // it is checked after it.
        activity: Arc<ConnActivity<R>>,
        head_watch: HeadWatch<R>,
        peer: SocketAddr,
        _guard: ConnectionGuard,
    }
}

impl<R, I, S, Q> Future for ServeConnection<R, I, S, Q>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
    Q: RequestSlot,
{
    type Output = ();

    // Inlined into its one caller: the runtime's task (plaintext) or the task that ran the
    // handshake first (TLS), which then polls no future of its own in between.
    #[inline(always)]
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
                if !stop {
                    if let Some(aged_at) = this.age.as_mut().and_then(|a| a.poll_reached(cx)) {
                        // Its maximum age: goodbye, as at a stop of this connection alone.
                        // It stays registered for the lifecycle's stop.
                        *this.age = None;
                        *this.shutting_down = true;
                        let mut bound = Bound::aged(this.activity, aged_at, cx);
                        if let Some(ended) = this.conn.as_mut().shut_down(cx, this.activity) {
                            break ended;
                        }
                        if this.activity.is_http2() {
                            bound.goodbye_said(this.activity);
                        }
                        *this.bound = Some(bound);
                        continue;
                    }
                }
                if stop {
                    *this.age = None;
                    *this.shutting_down = true;
                    *this.stop_listener = None;
                    let waits = this.conn.waits_for_request(this.activity);
                    let spread = this.conn.spreads_close(this.activity);
                    *this.linger = Linger::at_stop(this.activity, waits, spread);
                    // The peer's time starts at the lifecycle's stop, or at the connection's
                    // own point of the idle-close window.
                    let stopped_at = match this.linger.as_ref().and_then(|l| l.spread_point) {
                        Some(point) => point,
                        None => bound::stopped_at(this.activity),
                    };
                    let mut bound = Bound::new(this.activity, stopped_at, cx);
                    if this.linger.is_none() {
                        if let Some(ended) = this.conn.as_mut().shut_down(cx, this.activity) {
                            break ended;
                        }
                        if this.activity.is_http2() {
                            bound.goodbye_said(this.activity);
                        }
                    }
                    *this.bound = Some(bound);
                }
            }
            match this.conn.as_mut().poll(cx, this.activity) {
                Polled::Done(result) => {
                    if let Some(kind) = this.bound.as_mut().and_then(|b| b.ended()) {
                        count_cut(this.control, this.activity, kind);
                    }
                    break result;
                }
                Polled::Pending => {}
                Polled::PendingHttp2 => {
                    if !*this.shutting_down && this.activity.goaway.is_set() {
                        // One of this connection's responses asked to close it: GOAWAY.
                        *this.shutting_down = true;
                        *this.stop_listener = None;
                        this.conn.as_mut().graceful_shutdown();
                        let now = bound::lifecycle_now(this.activity);
                        let mut bound = Bound::new(this.activity, now, cx);
                        bound.goodbye_said(this.activity);
                        *this.bound = Some(bound);
                        continue;
                    }
                }
            }
            if let Some(linger) = this.linger {
                if linger.is_over(cx, this.activity) {
                    // A request came (it is answered, then the connection closes), or the
                    // wait is over.
                    if let Some(ended) =
                        end_linger(this.linger, this.conn.as_mut(), this.bound, this.activity)
                    {
                        break ended;
                    }
                    continue;
                }
            }
            if let Some(bound) = this.bound.as_mut() {
                if !bound.is_stopped() && this.control.stop.is_set() {
                    // Aged first, now stopped by the lifecycle too.
                    bound.stopped(bound::stopped_at(this.activity));
                }
                match bound.step(cx, this.activity, this.conn.http2_watch(), this.control) {
                    BoundStep::Wait => {}
                    BoundStep::ForceFinalGoaway => {
                        if let Some(watch) = this.conn.http2_watch() {
                            watch.force_ack();
                        }
                        continue;
                    }
                    BoundStep::Cut(_) if this.linger.is_some() => {
                        // Still waiting for a first request: the wait ends now, as its timer
                        // would have ended it.
                        if let Some(ended) =
                            end_linger(this.linger, this.conn.as_mut(), this.bound, this.activity)
                        {
                            break ended;
                        }
                        continue;
                    }
                    BoundStep::Cut(kind) => {
                        // Dropping hyper's connection closes it.
                        count_cut(this.control, this.activity, kind);
                        break Ok(());
                    }
                }
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
        if this.bound.is_some() {
            this.control
                .bounds
                .set(bound::registry_id(this.activity), None);
        }
        note_closed(this.activity);
        Poll::Ready(())
    }
}

/// Ends a stopped connection's wait for its next request: says goodbye (`Some` when that
/// ends the connection at once: it had carried no request).
#[cold]
fn end_linger<R, I, S, Q>(
    linger: &mut Option<Box<Linger<R>>>,
    conn: Pin<&mut HttpConnection<R, I, S, Q>>,
    bound: &mut Option<Box<Bound<R>>>,
    activity: &ConnActivity<R>,
) -> Option<Result<(), BoxError>>
where
    R: Runtime,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: HttpService,
    Q: RequestSlot,
{
    *linger = None;
    if !conn.graceful_shutdown() {
        return Some(Ok(()));
    }
    if let Some(bound) = bound.as_mut().filter(|_| activity.is_http2()) {
        if activity.heads() == 0 {
            bound.goodbye_said_after_waiting(activity);
        } else {
            bound.goodbye_said(activity);
        }
    }
    None
}

/// Counts a connection its task cut at its bound, unless the exit counted it already.
#[cold]
fn count_cut<R: Runtime>(control: &ServeControl, activity: &ConnActivity<R>, kind: CutKind) {
    if control.bounds.claim(bound::registry_id(activity)) {
        activity
            .admission
            .shared
            .counters()
            .count_connection_cut(kind);
    }
}

/// Notes a connection's close for the termination summary (after the signal only).
fn note_closed<R: Runtime>(activity: &ConnActivity<R>) {
    let shared = &activity.admission.shared;
    if shared.has_fired(lameduck::LifecycleSignal::ShutdownInitiated) {
        shared
            .counters()
            .note_connection_closed(bound::lifecycle_now(activity));
    }
}

/// Why a connection was closed while it waited for a request head.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("no complete request head within {HEADER_READ_TIMEOUT:?}")]
struct HeadTimedOut;
