//! [`lameduck`] for actix-web: kube-apiserver's graceful termination in place of actix's own
//! stop-accepting-at-once shutdown.
//!
//! * [`AdmissionMiddleware`]: the middleware (`App::wrap`): normal / long-running / exempt
//!   classification, 503 or 429 with `Retry-After` once the server stops accepting, 504 at
//!   the request timeout, a [`ShutdownNotice`] for long-running handlers, every request
//!   counted until its response body ends, and `Connection: close` on every response once new
//!   requests are no longer accepted. It answers `/readyz`, `/livez`, `/healthz` (and
//!   `/<endpoint>/<check>`) itself, before any route is tried; [`health_routes`] mounts them
//!   as routes instead.
//! * [`serve`]: hands an actix server (with a closure that binds it) to the lifecycle,
//!   which configures it so that lameduck alone decides when work ends (actix's signals off,
//!   its own shutdown timeout above every lameduck bound, connections counted), binds and
//!   runs it, stops it at the DAG point of the mode (`ServerHandle::stop(true)`) and notices
//!   its last connection closing at once, instead of actix's one-second shutdown polling.
//! * [`AutoH2cServer`]: the server for an `App` factory over plain-text HTTP/1 and h2c, and
//!   over TLS (HTTP/1.1 and HTTP/2, chosen by ALPN), whose HTTP/2 connections get GOAWAY when
//!   kube-apiserver's would (at `NotAcceptingNewRequest` in close-listener mode, after a 429 in
//!   retry-after mode), which actix-http never sends: each HTTP/2 connection, h2c or over
//!   TLS, passes through [`GoawayIo`], which watches the frame headers and writes the GOAWAY
//!   between two of actix's frames. actix-web's own `HttpServer` works with [`serve`] too,
//!   without HTTP/2 GOAWAY.
//! * [`websocket`]: the WebSocket goodbye for actix-ws sessions: a socket serves until its
//!   turn in the paced drain, then gets Close 1001 (Going Away) and its client's answer is
//!   awaited until the grace period's end (a silent client is cut and counted).
//!
//! The lifecycle driver itself is [`lameduck_hyper`]'s on tokio (actix-web runs on tokio):
//! signals, hooks, systemd, logs. One core and one gate are shared by every actix worker.
//!
//! ```no_run
//! use actix_web::{web, App};
//! use lameduck::Config;
//!
//! #[actix_web::main]
//! async fn main() -> std::io::Result<()> {
//!     let mut server = lameduck_actix::builder(Config::default()).prepare();
//!     let admission = lameduck_actix::AdmissionMiddleware::for_server(&server);
//!     let http = lameduck_actix::AutoH2cServer::new(move || {
//!         App::new()
//!             .wrap(admission.clone())
//!             .route("/", web::get().to(|| async { "ok" }))
//!     });
//!     lameduck_actix::serve(&mut server, "api", http, |http| http.bind("127.0.0.1:8080"))
//!         .unwrap();
//!     std::process::exit(server.run().await.unwrap().into());
//! }
//! ```
//!
//! # TLS
//!
//! [`AutoH2cServer::listen_tls`] and [`AutoH2cServer::bind_tls`] serve TLS with a
//! [`ServerTls`] (rustls, from PEM files reloaded when they change; see [`lameduck_tls`]).
//! lameduck terminates TLS below the GOAWAY watcher, so HTTP/2 over TLS gets the same GOAWAY
//! as h2c. Each handshake runs in its connection's own task on the worker, bounded by
//! [`ServerTls::handshake_timeout`], and the connection is counted from accept on, so a
//! termination waits for handshakes in progress, each for at most a second after the server
//! stopped accepting (then it is cut and counted). A plaintext HTTP request on the TLS port is
//! answered 400; failed handshakes are counted and logged without flooding. A server may mix
//! plain-text and TLS listeners.
//!
//! ```no_run
//! # use lameduck_actix::{Server, TokioRuntime};
//! # fn f(mut server: Server<TokioRuntime>) -> Result<(), Box<dyn std::error::Error>> {
//! let tls = lameduck_actix::ServerTls::from_files("/etc/tls/tls.crt", "/etc/tls/tls.key")?;
//! let http = lameduck_actix::AutoH2cServer::new(|| actix_web::App::new());
//! lameduck_actix::serve(&mut server, "api", http, |http| http.bind_tls("0.0.0.0:8443", &tls))?;
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! * `metrics`: records the lifecycle's series (phase, requests in flight, rejections by
//!   reason, signal times, drain durations, hook outcomes) through the `metrics` facade at
//!   lifecycle events, never per request; call `lameduck::metrics::record_state` in your
//!   `/metrics` handler before the exporter renders. Without it nothing of `metrics` is built.
//!
//! # Silent peers and connection ages
//!
//! A connection holds the exit only while it carries work in flight within that work's bound
//! (see [`lameduck::Shared::connection_bound`]). On [`AutoH2cServer`], once the server stops
//! accepting: a TLS handshake still running gets at most
//! [`SILENT_PEER_TIMEOUT`](lameduck::connection::SILENT_PEER_TIMEOUT) more, not the rest of
//! its timeout; an HTTP/2 connection gets its final GOAWAY when its client acknowledges the
//! PING or a second after the first GOAWAY, whichever comes first, and is closed a second
//! after the stop (or after its last stream ended) whatever its client does, or at its
//! streams' own bound; idle HTTP/1 connections are closed at the stop. Whatever is still open
//! past those bounds is closed by stopping actix forcibly. Every connection closed with its
//! peer silent is counted: `connections_cut` in the termination summary, by kind in
//! [`Counters::peer_counts`](lameduck::shared::counters::Counters::peer_counts).
//!
//! With a [maximum connection age](lameduck::Config::max_connection_age), each
//! [`AutoH2cServer`] connection's own age is drawn when it is accepted: at its age an HTTP/1
//! connection is closed after its response in progress (`Connection: close`), or at once
//! when idle, and an HTTP/2 one says the two-step GOAWAY, as after a 429; past the
//! [grace](lameduck::Config::max_connection_age_grace), if one is set, what is left is cut
//! and counted.
//!
//! actix-web's own `HttpServer` gives lameduck no way to its connections' I/O, so it does
//! less: its HTTP/2 connections get no GOAWAY (at the stop or at their age); an HTTP/1
//! connection past its age is closed after its next response (the middleware's
//! `Connection: close`) but not while idle, and nothing is cut at the age's grace; its TLS
//! handshakes are actix's own; the connections still open [`CLOSE_AFTER_DRAIN`] after the
//! drain are closed together by stopping actix forcibly (and counted).
//!
//! Every step of a termination is logged through `tracing` (install a subscriber, such as
//! `tracing_subscriber::fmt()`, to see it), ending with a one-line termination summary.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod connection;
mod goaway;
mod health;
mod io;
mod serve;
mod server;
mod tls;
pub mod websocket;

use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::MessageBody;
use actix_web::dev::{Extensions, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{ConnectionType, StatusCode};
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use bytes::Bytes;
use lameduck::responses::{CannedResponse, REQUEST_TIMEOUT, ROUTES_NOT_READY};
use lameduck::{ConnectionKind, RequestInfo, Shared, StdClock};
use lameduck_hyper::adapter::{
    decide, Classifier, Deadline, Decision, LifecycleResponse, RequestExtensions, RequestTracker,
};
use lameduck_hyper::Runtime;
use pin_project_lite::pin_project;

pub use body::LameduckBody;
pub use health::health_routes;
// The GOAWAY watcher's parts, public for the crate's own integration tests only.
#[doc(hidden)]
pub use goaway::{ConnectionCut, GoawayBroadcast, GoawayIo, GoawayRequest};
/// Server-Sent Events at shutdown: events until the stream's turn, then a `retry:` hint.
pub use lameduck_hyper::sse;
pub use lameduck_hyper::{Builder, ConnectionTracker, Handle, ServeError, Server, ShutdownNotice};
pub use lameduck_tls::{ServerTls, TlsError};
pub use lameduck_tokio::builder;
pub use lameduck_tokio::TokioRuntime;
pub use serve::{
    actix_shutdown_timeout, serve, ActixServeError, ActixServer, ServeSetup, CLOSE_AFTER_DRAIN,
};
pub use server::AutoH2cServer;

/// The admission middleware; see the [crate docs](crate). Cheap to clone: one per worker.
///
/// It also answers the health endpoints (`/readyz`, `/livez`, `/healthz` and
/// `/<endpoint>/<check>`) before the app's routes are tried, at the cost of a look at one
/// byte of every other request's path ([`AdmissionMiddleware::serve_health`] turns that off).
#[derive(Clone)]
pub struct AdmissionMiddleware {
    shared: Arc<Shared>,
    clock: StdClock,
    classifier: Classifier,
    serve_health: bool,
    /// Whether connections have a maximum age (read once, from the configuration).
    ages: bool,
}

impl std::fmt::Debug for AdmissionMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionMiddleware")
            .finish_non_exhaustive()
    }
}

impl AdmissionMiddleware {
    /// The middleware for `server`'s lifecycle, with [`lameduck::default_is_long_running`].
    #[must_use]
    pub fn for_server<R: Runtime>(server: &Server<R>) -> Self {
        Self::new(Arc::clone(server.shared()), server.clock())
    }

    /// Middleware for `shared`'s lifecycle (read with `clock`), with
    /// [`lameduck::default_is_long_running`]. [`AdmissionMiddleware::for_server`] takes both from the
    /// server.
    #[must_use]
    pub fn new(shared: Arc<Shared>, clock: StdClock) -> Self {
        let ages = !shared.config().max_connection_age().is_zero();
        AdmissionMiddleware {
            shared,
            clock,
            classifier: Arc::new(lameduck::default_is_long_running),
            serve_health: true,
            ages,
        }
    }

    /// Whether the middleware answers the health endpoints itself (the default). Turn it off
    /// to route them in the app, with [`health_routes`] after the app's own routes.
    #[must_use]
    pub fn serve_health(mut self, serve: bool) -> Self {
        self.serve_health = serve;
        self
    }

    /// Uses `is_long_running` to pick long-running requests.
    #[must_use]
    pub fn long_running(
        mut self,
        is_long_running: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.classifier = Arc::new(is_long_running);
        self
    }
}

impl<S, B> Transform<S, ServiceRequest> for AdmissionMiddleware
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<LameduckBody<B>>;
    type Error = actix_web::Error;
    type Transform = AdmissionService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(AdmissionService {
            service,
            admission: Rc::new(self.clone()),
        }))
    }
}

/// The service [`AdmissionMiddleware`] wraps around the app.
pub struct AdmissionService<S> {
    service: S,
    admission: Rc<AdmissionMiddleware>,
}

impl<S> std::fmt::Debug for AdmissionService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionService").finish_non_exhaustive()
    }
}

/// actix's request extensions, for [`Decision::insert_extensions`].
struct ActixExtensions<'a>(std::cell::RefMut<'a, Extensions>);

impl RequestExtensions for ActixExtensions<'_> {
    fn insert_extension<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(value);
    }
}

/// The actix response for one of the lifecycle's own responses (a canned 429, 503 or 504, or
/// a health answer): its status, headers and body, closing the connection after it when the
/// response says so.
fn actix_response(response: impl LifecycleResponse) -> HttpResponse<Bytes> {
    let status =
        StatusCode::from_u16(response.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (headers, close) = (response.headers(), response.close_connection());
    let mut res = HttpResponse::with_body(status, response.into_body());
    for (name, value) in headers {
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            res.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
    }
    if close {
        res.head_mut().set_connection_type(ConnectionType::Close);
    }
    res
}

/// One of the core's canned responses (429, 503) for `req`, through the middleware's body.
fn canned<B>(req: HttpRequest, c: &CannedResponse) -> ServiceResponse<LameduckBody<B>> {
    if c.close_connection {
        server::request_goaway(req.conn_data());
    }
    ServiceResponse::new(
        req,
        actix_response(c).map_body(|_, body| LameduckBody::canned(body)),
    )
}

/// The kind of connection `req` came on: HTTP/2 only when [`AutoH2cServer`] watches its
/// frames (and so ends it with the two-step GOAWAY); actix-web's own HTTP/2 sends none.
/// (HTTP/1 is told by the version alone: the connection's data is looked up for HTTP/2 only.)
#[inline]
fn connection_kind(req: &ServiceRequest) -> ConnectionKind {
    if req.version() != actix_web::http::Version::HTTP_2 {
        ConnectionKind::Http1
    } else if req.conn_data::<Rc<goaway::GoawayRequest>>().is_some() {
        ConnectionKind::Http2
    } else {
        ConnectionKind::Unknown
    }
}

/// Once new requests are no longer accepted (or, when the sockets outlive this process, once
/// termination started), every response closes its keep-alive connection.
fn close_if_draining<B>(shared: &Shared, res: &mut ServiceResponse<B>) {
    if shared.keep_alive_ended() {
        close_connection_after(res);
    }
}

/// Closes an HTTP/1 connection past its [maximum age](lameduck::Config::max_connection_age)
/// after `res` (`Connection: close`): its age is in its connection data (an HTTP/2
/// connection of [`AutoH2cServer`] says GOAWAY at its age by itself; actix-web's own HTTP/2
/// cannot end a connection).
#[cold]
#[inline(never)]
fn close_if_aged<B>(res: &mut ServiceResponse<B>) {
    let aged_at = res.request().conn_data::<connection::AgedAt>().copied();
    if aged_at.is_some_and(|connection::AgedAt(at)| TokioRuntime.now() >= at) {
        res.response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
}

/// Ends `res`'s connection gracefully after it: HTTP/1 `Connection: close`, HTTP/2 GOAWAY
/// (through [`AutoH2cServer`]).
fn close_connection_after<B>(res: &mut ServiceResponse<B>) {
    server::request_goaway(res.request().conn_data());
    res.response_mut()
        .head_mut()
        .set_connection_type(ConnectionType::Close);
}

impl<S, B> Service<ServiceRequest> for AdmissionService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<LameduckBody<B>>;
    type Error = actix_web::Error;
    type Future = AdmissionFuture<S::Future>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let AdmissionMiddleware {
            shared,
            classifier,
            clock,
            serve_health,
            ages: _,
        } = &*self.admission;
        if *serve_health && lameduck::health::route(req.path()).is_some() {
            return answer_health(&self.admission, req);
        }
        let kind = connection_kind(&req);
        // Kept in the connection's data only if it arrived while arrivals were watched.
        let arrival = if shared.counters().watching_arrivals() {
            req.conn_data::<lameduck_hyper::adapter::ConnectionArrival>()
        } else {
            None
        };
        let decision = decide(
            shared,
            &request_info(&req),
            classifier,
            *clock,
            &TokioRuntime,
            kind,
            arrival,
        );
        let (tracker, timeout, long_running, close_connection) = match decision {
            Decision::Reject(response) => {
                let (req, _payload) = req.into_parts();
                return AdmissionFuture {
                    state: FutureState::Rejected {
                        req: Some(req),
                        response,
                    },
                };
            }
            Decision::Serve {
                tracker,
                timeout,
                notice,
                upgrade,
                close_connection,
            } => {
                // Only long-running requests get a notice (and, for an upgrade, its ticket).
                let long_running = notice.is_some();
                if long_running {
                    let mut extensions = ActixExtensions(req.extensions_mut());
                    Decision::insert_extensions(notice, upgrade, &mut extensions);
                }
                (tracker, timeout, long_running, close_connection)
            }
        };
        AdmissionFuture {
            state: FutureState::Called {
                // The request is not cloned: actix's router needs sole ownership to route it.
                call: self.service.call(req),
                tracker,
                long_running,
                close_connection,
                // Armed only if the handler has to wait: no clock read, no timer otherwise.
                deadline: Deadline::after(timeout),
                admission: Rc::clone(&self.admission),
            },
        }
    }
}

/// The answer to a health request, from the lifecycle; once keep-alive has ended it closes
/// its connection, as every response does then.
#[cold]
#[inline(never)]
fn answer_health<F>(admission: &AdmissionMiddleware, req: ServiceRequest) -> AdmissionFuture<F> {
    let (req, _payload) = req.into_parts();
    let now = admission.clock.instant(TokioRuntime.now());
    let query = Some(req.query_string()).filter(|q| !q.is_empty());
    let mut res = match admission.shared.health(req.path(), query, now) {
        Some(health) => actix_response(health),
        None => HttpResponse::with_body(
            StatusCode::NOT_FOUND,
            Bytes::from_static(b"404 page not found\n"),
        ),
    };
    let aged = admission.ages
        && req
            .conn_data::<connection::AgedAt>()
            .is_some_and(|connection::AgedAt(at)| TokioRuntime.now() >= *at);
    if admission.shared.keep_alive_ended() {
        server::request_goaway(req.conn_data());
        res.head_mut().set_connection_type(ConnectionType::Close);
    } else if aged {
        res.head_mut().set_connection_type(ConnectionType::Close);
    }
    AdmissionFuture {
        state: FutureState::Health {
            answer: Some((req, res)),
        },
    }
}

/// The parts of `req` that classification looks at.
#[inline]
fn request_info(req: &ServiceRequest) -> RequestInfo<'_> {
    let headers = req.headers();
    let (mut accept, mut upgrade) = (None, false);
    // One pass over the (few) header names costs less than two hashed look-ups.
    for name in headers.keys() {
        if *name == header::ACCEPT {
            accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        } else if *name == header::UPGRADE {
            upgrade = true;
        }
    }
    RequestInfo {
        path: req.path(),
        query: Some(req.query_string()).filter(|q| !q.is_empty()),
        accept,
        upgrade,
    }
}

pin_project! {
    /// The response future of [`AdmissionService`]: the app's response future, bounded by
    /// the request timeout, or one of the canned rejections.
    pub struct AdmissionFuture<F> {
        #[pin]
        state: FutureState<F>,
    }
}

pin_project! {
    #[project = FutureStateProj]
    enum FutureState<F> {
        Rejected {
            req: Option<HttpRequest>,
            response: &'static CannedResponse,
        },
        Health {
            answer: Option<(HttpRequest, HttpResponse<Bytes>)>,
        },
        Called {
            #[pin]
            call: F,
            tracker: Option<RequestTracker>,
            long_running: bool,
            // Drawn at the goaway chance: close the keep-alive connection after the response.
            close_connection: bool,
            deadline: Deadline<TokioRuntime>,
            admission: Rc<AdmissionMiddleware>,
        },
    }
}

impl<F> std::fmt::Debug for AdmissionFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionFuture").finish_non_exhaustive()
    }
}

impl<F, B> Future for AdmissionFuture<F>
where
    F: Future<Output = Result<ServiceResponse<B>, actix_web::Error>>,
{
    type Output = Result<ServiceResponse<LameduckBody<B>>, actix_web::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            FutureStateProj::Rejected { req, response } => {
                let req = req.take().expect("AdmissionFuture polled after completion");
                Poll::Ready(Ok(canned(req, response)))
            }
            FutureStateProj::Health { answer } => {
                let (req, res) = answer
                    .take()
                    .expect("AdmissionFuture polled after completion");
                let res = res.map_body(|_, body| LameduckBody::canned(body));
                Poll::Ready(Ok(ServiceResponse::new(req, res)))
            }
            FutureStateProj::Called {
                call,
                tracker,
                long_running,
                close_connection,
                deadline,
                admission,
            } => {
                let mut res = match call.poll(cx) {
                    Poll::Ready(Ok(res)) => res,
                    Poll::Ready(Err(e)) => {
                        drop(tracker.take());
                        return Poll::Ready(Err(e));
                    }
                    Poll::Pending => {
                        std::task::ready!(deadline.poll_expired(&TokioRuntime, cx));
                        // Past `request_timeout`: 504, and the request is released.
                        if let Some(tracker) = tracker.take() {
                            tracker.count_timeout();
                        }
                        return Poll::Ready(Err(RequestTimedOut.into()));
                    }
                };
                let shared = &admission.shared;
                if res.status() == StatusCode::NOT_FOUND && !shared.routes_complete() {
                    // An unknown path before every route is installed: 503, retry later.
                    shared
                        .counters()
                        .count_rejection(lameduck::rejections::RejectionReason::RoutesNotReady);
                    drop(tracker.take());
                    let (req, _) = res.into_parts();
                    return Poll::Ready(Ok(canned(req, &ROUTES_NOT_READY)));
                }
                close_if_draining(shared, &mut res);
                if admission.ages {
                    close_if_aged(&mut res);
                }
                if *close_connection {
                    // Drawn at the goaway chance.
                    close_connection_after(&mut res);
                }
                let deadline = std::mem::replace(deadline, Deadline::none());
                let tracker = tracker.take();
                // One expression: the response is built in place, not moved once more.
                Poll::Ready(Ok(res.map_body(|_, body| {
                    LameduckBody::tracked(body, tracker, *long_running, deadline)
                })))
            }
        }
    }
}

/// A normal request ran past `request_timeout`: answered with the core's canned 504.
#[derive(Debug)]
struct RequestTimedOut;

impl std::fmt::Display for RequestTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request did not complete within the allotted timeout")
    }
}

impl actix_web::ResponseError for RequestTimedOut {
    fn status_code(&self) -> StatusCode {
        StatusCode::GATEWAY_TIMEOUT
    }

    fn error_response(&self) -> HttpResponse {
        actix_response(&REQUEST_TIMEOUT).map_into_boxed_body()
    }
}
