//! The tower layer that admits requests: classification, 429/503 rejections, the request
//! timeout (504), health endpoints, and the shutdown notice for long-running handlers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use lameduck::responses::{CannedResponse, REQUEST_TIMEOUT, ROUTES_NOT_READY};
use lameduck::shared::OwnedLongRunningTicket;
use lameduck::{Admission, ConnectionKind, RequestClass, RequestInfo, Shared, StdClock};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::arrivals::ConnectionArrival;
use crate::connection::head_watch::InFlight;
use crate::request::body::BodyEnd;
use crate::request::body::LameduckBody;
use crate::request::goaway;
use crate::request::layer::{AdmissionLayer, Classifier};
use crate::request::notice::ShutdownNotice;
use crate::request::response::http_response;
use crate::request::ticket::{
    request_timeout, LongRunningTicketHolder, RequestTracker, Tracker, UpgradeTicket,
};
use crate::runtime::Runtime;

impl<S, R: Runtime> Layer<S> for AdmissionLayer<R> {
    type Service = AdmissionService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        AdmissionService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`AdmissionLayer`] wraps around a handler.
#[derive(Clone)]
pub struct AdmissionService<S, R: Runtime> {
    inner: S,
    layer: AdmissionLayer<R>,
}

impl<S: fmt::Debug, R: Runtime> fmt::Debug for AdmissionService<S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// What admission decided for one request; see [`decide`].
#[derive(Debug)]
pub enum Decision {
    /// Answer at once with this canned response (503 or 429).
    Reject(&'static CannedResponse),
    /// Serve the request.
    Serve {
        /// Hold this until the response body ends; it keeps the request counted.
        tracker: Option<RequestTracker>,
        /// The request timeout (normal requests, and exempt ones admitted before the gate
        /// closed): answer 504 if the handler has not responded by then, and abort the
        /// response if its body has not ended by then.
        timeout: Option<Duration>,
        /// For the handler, as a request extension (long-running requests; see
        /// [`Decision::insert_extensions`]).
        notice: Option<ShutdownNotice>,
        /// For the handler, as a request extension (long-running upgrade requests).
        upgrade: Option<UpgradeTicket>,
        /// Drawn at [`lameduck::Config::goaway_chance`] (never for exempt requests): end
        /// the connection gracefully after this response (HTTP/1 `Connection: close`,
        /// HTTP/2 GOAWAY).
        close_connection: bool,
    },
}

/// A request's extension map, as the adapters' request types have one each.
pub trait RequestExtensions {
    /// Inserts `value`, replacing any value of its type.
    fn insert_extension<T: Clone + Send + Sync + 'static>(&mut self, value: T);
}

impl RequestExtensions for http::Extensions {
    fn insert_extension<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        self.insert(value);
    }
}

impl Decision {
    /// Inserts the `notice` and `upgrade` of a [`Decision::Serve`] into the request's
    /// `extensions`, where the handler finds them (the adapter keeps the tracker and the
    /// timeout).
    pub fn insert_extensions(
        notice: Option<ShutdownNotice>,
        upgrade: Option<UpgradeTicket>,
        extensions: &mut impl RequestExtensions,
    ) {
        if let Some(notice) = notice {
            extensions.insert_extension(notice);
        }
        if let Some(upgrade) = upgrade {
            extensions.insert_extension(upgrade);
        }
    }
}

/// Classifies and admits one request that came on a connection of `kind`: the admission
/// decision every adapter applies (the tower layer here, actix-web's middleware elsewhere).
/// Allocation-free for normal requests.
pub fn decide<R: Runtime>(
    shared: &Arc<Shared>,
    info: &RequestInfo<'_>,
    classifier: &Classifier,
    clock: StdClock,
    runtime: &R,
    kind: ConnectionKind,
    arrival: Option<&ConnectionArrival>,
) -> Decision {
    let class = shared.classify(info, |i| classifier(i));
    if class != RequestClass::Exempt {
        crate::arrivals::note_request(shared, clock, runtime);
        if let Some(arrival) = arrival {
            arrival.first_request(shared);
        }
    }
    match shared.admit_on(class, kind) {
        Admission::Rejected(rejection) => Decision::Reject(rejection.response()),
        Admission::Late(class) => Decision::Serve {
            tracker: Some(RequestTracker::late(shared)),
            timeout: request_timeout(shared),
            notice: (class == RequestClass::LongRunning)
                .then(|| ShutdownNotice::new(Arc::clone(shared))),
            upgrade: None,
            close_connection: true,
        },
        // Health and metrics: tracked like a normal request while the gate is open (so the
        // drain waits for a scrape in flight), untracked once it closed; never rejected.
        Admission::Exempt(ticket) => Decision::Serve {
            timeout: ticket.as_ref().and_then(|_| request_timeout(shared)),
            tracker: ticket.map(|t| RequestTracker(Tracker::Normal(t))),
            notice: None,
            upgrade: None,
            close_connection: shared.keep_alive_ended(),
        },
        Admission::Normal(ticket) => Decision::Serve {
            tracker: Some(RequestTracker(Tracker::Normal(ticket))),
            timeout: request_timeout(shared),
            notice: None,
            upgrade: None,
            close_connection: goaway::draw(shared.config().goaway_chance())
                || shared.keep_alive_ended(),
        },
        Admission::LongRunning(ticket) => {
            let holder = LongRunningTicketHolder::new(ticket, clock);
            Decision::Serve {
                upgrade: info.upgrade.then(|| UpgradeTicket(Arc::clone(&holder))),
                notice: Some(ShutdownNotice::with_turn(Arc::clone(shared), &holder)),
                tracker: Some(RequestTracker(Tracker::LongRunning(holder))),
                timeout: None,
                close_connection: goaway::draw(shared.config().goaway_chance())
                    || shared.keep_alive_ended(),
            }
        }
    }
}

/// The parts of an HTTP request that classification looks at.
#[must_use]
#[inline]
pub fn request_info<B>(req: &Request<B>) -> RequestInfo<'_> {
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
        path: req.uri().path(),
        query: req.uri().query(),
        accept,
        upgrade,
    }
}

/// What admission decided for a request head, before the handler is called.
pub(crate) enum Admitted {
    /// Serve it; `tracker` keeps it counted until its response body ends. With
    /// `close_connection` (drawn at the goaway chance), the response ends its connection
    /// gracefully.
    Serve {
        tracker: Option<RequestTracker>,
        close_connection: bool,
    },
    /// Answer it with this response of the layer's own (boxed: the common case stays small).
    Answer(Box<LayerAnswer>),
}

/// A response of the layer's own, and what keeps it counted until its body ends.
pub(crate) type LayerAnswer = (Response<Bytes>, Option<RequestTracker>);

impl Admitted {
    /// The response future: `call` passes the request to the handler when it is served.
    pub(crate) fn into_future<B, F, R: Runtime>(
        self,
        req: Request<B>,
        in_flight: Option<InFlight<R>>,
        runtime: R,
        call: impl FnOnce(Request<B>) -> F,
    ) -> AdmissionFuture<F, R> {
        match self {
            Admitted::Serve {
                tracker,
                close_connection,
            } => {
                let end = BodyEnd::new(tracker, runtime);
                AdmissionFuture::call(call(req), end, in_flight, close_connection)
            }
            Admitted::Answer(answer) => AdmissionFuture::ready(answer, in_flight),
        }
    }
}

impl<R: Runtime> AdmissionLayer<R> {
    /// The arrival of a connection that begins now ([`ConnectionArrival::accepted`]).
    #[inline]
    pub(crate) fn connection_arrival(&self) -> Option<ConnectionArrival> {
        ConnectionArrival::accepted(&self.shared, self.clock, &self.runtime)
    }

    /// Admits the request `req`, which came on a connection of `kind` (answering health
    /// requests and rejections itself). Long-running requests get their [`ShutdownNotice`]
    /// (and, for an upgrade, its [`UpgradeTicket`]) as request extensions.
    ///
    /// The path of a normal request is kept short: no allocation, no clock read, no timer,
    /// one pass over the request's header names.
    #[inline]
    pub(crate) fn admit<B>(
        &self,
        req: &mut Request<B>,
        kind: ConnectionKind,
        arrival: Option<&ConnectionArrival>,
    ) -> Admitted {
        let shared = &self.shared;
        let info = request_info(req);
        if self.serve_health && lameduck::health::route(info.path).is_some() {
            if let Some((response, tracker)) = self.answer_health(&info) {
                return Admitted::Answer(Box::new((response, tracker)));
            }
        }
        let class = shared.classify(&info, |i| match &self.classifier {
            None => lameduck::default_is_long_running(i),
            Some(classifier) => classifier(i),
        });
        let is_exempt = class == lameduck::RequestClass::Exempt;
        if !is_exempt {
            crate::arrivals::note_request(shared, self.clock, &self.runtime);
            if let Some(arrival) = arrival {
                arrival.first_request(shared);
            }
        }
        let tracker = match shared.admit_on(class, kind) {
            Admission::Normal(ticket) => Some(RequestTracker(Tracker::Normal(ticket))),
            Admission::Late(class) => return self.serve_late(req, class),
            Admission::Rejected(rejection) => {
                // A gRPC call gets the gRPC form (read from the content-type, here only).
                let response = crate::grpc::rejection_for(req.headers(), rejection.response());
                return Admitted::Answer(Box::new((response, None)));
            }
            // Health and metrics: tracked like a normal request while the gate is open (so
            // the drain waits for a scrape in flight), untracked once it closed; never
            // rejected, and bounded by the request timeout only while tracked.
            Admission::Exempt(None) => None,
            Admission::Exempt(Some(ticket)) => Some(RequestTracker(Tracker::Normal(ticket))),
            Admission::LongRunning(ticket) => {
                let upgrade = info.upgrade;
                return self.serve_long_running(req, ticket, upgrade);
            }
        };
        // A normal (or tracked exempt) request is bounded by the request timeout, armed by
        // its end the first time it waits. Exempt requests never end their connection.
        Admitted::Serve {
            close_connection: (!is_exempt && goaway::draw(self.goaway_chance))
                || self.shared.keep_alive_ended(),
            tracker,
        }
    }

    /// The answer to a health request (tracked while the gate is open), or `None` when the
    /// core does not answer `info`.
    #[cold]
    fn answer_health(
        &self,
        info: &RequestInfo<'_>,
    ) -> Option<(Response<Bytes>, Option<RequestTracker>)> {
        let shared = &self.shared;
        // The clock is read for health paths only.
        let now = self.clock.instant(self.runtime.now());
        let health = shared.health(info.path, info.query, now)?;
        // Exempt: counted in the drain while the gate is open, like any request.
        let tracker = match shared.admit(lameduck::RequestClass::Exempt) {
            Admission::Exempt(ticket) => ticket.map(|t| RequestTracker(Tracker::Normal(t))),
            _ => None,
        };
        Some((http_response(health), tracker))
    }

    /// Serves a request that came after the gate closed ([`Admission::Late`]): bounded by
    /// the request timeout, its response ends the connection; a long-running handler gets a
    /// shutdown notice that has already fired, so that it ends the stream at once.
    #[cold]
    #[inline(never)]
    fn serve_late<B>(&self, req: &mut Request<B>, class: RequestClass) -> Admitted {
        if class == RequestClass::LongRunning {
            let notice = ShutdownNotice::new(Arc::clone(&self.shared));
            Decision::insert_extensions(Some(notice), None, req.extensions_mut());
        }
        Admitted::Serve {
            tracker: Some(RequestTracker::late(&self.shared)),
            close_connection: true,
        }
    }

    /// Admits a long-running request: no request timeout; the handler gets the shutdown
    /// notice (and, for an upgrade, its [`UpgradeTicket`]) as request extensions.
    #[cold]
    fn serve_long_running<B>(
        &self,
        req: &mut Request<B>,
        ticket: OwnedLongRunningTicket,
        upgrade: bool,
    ) -> Admitted {
        let holder = LongRunningTicketHolder::new(ticket, self.clock);
        Decision::insert_extensions(
            Some(ShutdownNotice::with_turn(Arc::clone(&self.shared), &holder)),
            upgrade.then(|| UpgradeTicket(Arc::clone(&holder))),
            req.extensions_mut(),
        );
        Admitted::Serve {
            tracker: Some(RequestTracker(Tracker::LongRunning(holder))),
            close_connection: goaway::draw(self.goaway_chance) || self.shared.keep_alive_ended(),
        }
    }
}

impl<S, R, ReqBody, ResBody> Service<Request<ReqBody>> for AdmissionService<S, R>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    R: Runtime,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<LameduckBody<ResBody, R>>;
    type Error = S::Error;
    type Future = AdmissionFuture<S::Future, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let inner = &mut self.inner;
        let runtime = self.layer.runtime.clone();
        // A middleware inside a server that is not this crate's: the connection is unknown.
        self.layer
            .admit(&mut req, ConnectionKind::Unknown, None)
            .into_future(req, None, runtime, |req| inner.call(req))
    }
}

pin_project! {
    /// The response future of [`AdmissionService`] (and of the connections
    /// [`Server::serve`](crate::Server::serve) serves). Adds three words to the handler's
    /// future: large futures are moved by value, so every byte counts.
    pub struct AdmissionFuture<F, R: Runtime> {
        #[pin]
        state: FutureState<F, R>,
        // The connection is busy with this request until its response ends.
        in_flight: Option<InFlight<R>>,
        // Drawn at the goaway chance: the response ends its connection gracefully.
        close_connection: bool,
    }
}

pin_project! {
    #[project = FutureProj]
    enum FutureState<F, R: Runtime> {
        /// Answered by the layer itself (health answers stay tracked until their body ends);
        /// boxed, to keep the common case small.
        Ready {
            answer: Option<Box<LayerAnswer>>,
        },
        /// Passed to the handler.
        Call {
            #[pin]
            future: F,
            // Moves to the response body.
            end: BodyEnd<R>,
        },
    }
}

impl<F, R: Runtime> AdmissionFuture<F, R> {
    /// The handler's `future`, its response to be ended by `end`.
    #[inline]
    pub(crate) fn call(
        future: F,
        end: BodyEnd<R>,
        in_flight: Option<InFlight<R>>,
        close_connection: bool,
    ) -> Self {
        AdmissionFuture {
            in_flight,
            close_connection,
            state: FutureState::Call { future, end },
        }
    }

    pub(crate) fn ready(answer: Box<LayerAnswer>, in_flight: Option<InFlight<R>>) -> Self {
        AdmissionFuture {
            in_flight,
            close_connection: false,
            state: FutureState::Ready {
                answer: Some(answer),
            },
        }
    }
}

impl<F, R: Runtime> fmt::Debug for AdmissionFuture<F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdmissionFuture")
    }
}

impl<F, R, B, E> Future for AdmissionFuture<F, R>
where
    F: Future<Output = Result<Response<B>, E>>,
    R: Runtime,
    B: http_body::Body<Data = Bytes>,
{
    type Output = Result<Response<LameduckBody<B, R>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let close = *this.close_connection;
        match this.state.project() {
            FutureProj::Call { future, end } => match future.poll(cx) {
                Poll::Ready(Ok(response)) => {
                    Poll::Ready(Ok(handler_response(response, end, this.in_flight, close)))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => {
                    ready!(Pin::new(&mut *end).poll_deadline(cx));
                    Poll::Ready(Ok(timed_out(this.in_flight, close)))
                }
            },
            FutureProj::Ready { answer: slot } => match slot.take() {
                Some(boxed) => {
                    let (response, tracker) = *boxed;
                    Poll::Ready(Ok(answer(response, tracker, this.in_flight, close)))
                }
                // Polled after completion: stay pending rather than panic.
                None => Poll::Pending,
            },
        }
    }
}

/// The handler's `response` on its way out, its body ended by `end` (with its timer, armed or
/// not: it bounds the whole response); the head is changed in place and moved once. An unknown
/// path before every route is installed is answered 503 instead (retry later).
#[inline(always)]
pub(crate) fn handler_response<B, R: Runtime>(
    mut response: Response<B>,
    end: &mut BodyEnd<R>,
    in_flight: &mut Option<InFlight<R>>,
    close: bool,
) -> Response<LameduckBody<B, R>> {
    if response.status() == StatusCode::NOT_FOUND && routes_pending(end) {
        end.clear();
        let response = http_response::<Bytes>(&ROUTES_NOT_READY);
        return answer(response, None, in_flight, close);
    }
    let in_flight = in_flight.take();
    before_response(response.headers_mut(), in_flight.as_ref(), close);
    let end = end.take();
    response.map(|body| LameduckBody::tracked_with(body, end, in_flight))
}

/// The 504 for a handler that ran past the request timeout (the request is released).
#[cold]
pub(crate) fn timed_out<B, R: Runtime>(
    in_flight: &mut Option<InFlight<R>>,
    close: bool,
) -> Response<LameduckBody<B, R>> {
    let response = http_response::<Bytes>(&REQUEST_TIMEOUT);
    answer(response, None, in_flight, close)
}

/// The last look at a response's head: with `close` (drawn at the goaway chance), HTTP/1's
/// hyper closes the connection after this response; HTTP/2 has no such header: the
/// connection's `InFlight` turns it into a GOAWAY (without one, behind a bare tower layer,
/// hyper drops the header).
#[inline(always)]
fn before_response<R: Runtime>(
    headers: &mut http::HeaderMap,
    in_flight: Option<&InFlight<R>>,
    close: bool,
) {
    if close {
        headers.insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    if let Some(in_flight) = in_flight {
        in_flight.before_response(headers);
    }
}

/// A response of the layer's own (tracked by `tracker` until its body ends), as an admitted
/// response.
pub(crate) fn answer<B, R: Runtime>(
    mut response: Response<Bytes>,
    tracker: Option<RequestTracker>,
    in_flight: &mut Option<InFlight<R>>,
    close: bool,
) -> Response<LameduckBody<B, R>> {
    let in_flight = in_flight.take();
    before_response(response.headers_mut(), in_flight.as_ref(), close);
    response.map(|data| LameduckBody::canned_tracked(data, tracker).in_flight(in_flight))
}

/// Whether routes are still being installed (start-up only), so that a 404 means "not yet";
/// counts the 503 the caller then answers.
fn routes_pending<R: Runtime>(end: &BodyEnd<R>) -> bool {
    end.shared().is_some_and(|shared| {
        let pending = !shared.routes_complete();
        if pending {
            shared
                .counters()
                .count_rejection(lameduck::rejections::RejectionReason::RoutesNotReady);
        }
        pending
    })
}
