//! The hyper service of a connection [`crate::Server`] serves ([`ConnService`]) and the
//! response future it makes for each request ([`ConnResponseFuture`]). On its first
//! poll it admits the request, then asks the user's service for readiness and calls it, as
//! tower's `oneshot` does.
//!
//! Doing both there, not in the connection's service, matters for cost: hyper stores the
//! future its service returns in a slot of its own, and a handler's future is large (about
//! 1 KB for an `async` handler holding its request). Returned by the service, it would be
//! copied whole into that slot on every request; started here, hyper stores a
//! request-sized future, the request is admitted where it lies, and the handler's future is
//! built in place.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::connection::head_watch::{ConnActivity, InFlight};
use crate::error::BoxError;
use crate::request::admission::{answer, handler_response, timed_out, Admitted, LayerAnswer};
use crate::request::body::{BodyEnd, LameduckBody};
use crate::request::response::http_response;
use crate::runtime::Runtime;

/// A handler's future at most this large is started when hyper hands over the request (see
/// [`ConnResponseFuture::new`]); a larger one on the response future's first poll.
const STARTED_AT_CALL: usize = 128;

/// Whether `S`'s handler is started when hyper hands over the request: its future is small
/// (a closure that does not keep its request). The connection then keeps requests in a
/// [`Box`] slot (used only while the service is not ready), otherwise inline: see
/// [`RequestSlot`].
#[must_use]
pub(crate) const fn started_at_call<S: Service<Request<Incoming>>>() -> bool {
    std::mem::size_of::<S::Future>() <= STARTED_AT_CALL
}

/// Where a response future keeps its request until the service is called: inline
/// ([`Request`], for handlers called on the first poll, whose large future is built where the
/// request lay) or boxed (`Box<Request>`, for handlers called at once, which need it only
/// while the service is not ready: the response future then stays small, and hyper stores it
/// without copying a request-sized future).
pub(crate) trait RequestSlot: Send + 'static {
    /// The handler is admitted and called when hyper hands over the request.
    const AT_CALL: bool;
    /// Keeps `req`.
    fn keep(req: Request<Incoming>) -> Self;
    /// The request kept.
    fn request(&mut self) -> &mut Request<Incoming>;
    /// Gives the request back.
    fn into_request(self) -> Request<Incoming>;
}

impl RequestSlot for Request<Incoming> {
    const AT_CALL: bool = false;
    #[inline(always)]
    fn keep(req: Request<Incoming>) -> Self {
        req
    }
    #[inline(always)]
    fn request(&mut self) -> &mut Request<Incoming> {
        self
    }
    #[inline(always)]
    fn into_request(self) -> Request<Incoming> {
        self
    }
}

/// The boxed request slot (see [`RequestSlot`]).
pub(crate) type BoxedRequest = Box<Request<Incoming>>;

impl RequestSlot for BoxedRequest {
    const AT_CALL: bool = true;
    #[cold]
    fn keep(req: Request<Incoming>) -> Self {
        Box::new(req)
    }
    fn request(&mut self) -> &mut Request<Incoming> {
        self
    }
    fn into_request(self) -> Request<Incoming> {
        *self
    }
}

pin_project! {
    /// The response future of one request of a served connection (see the module's
    /// documentation): `S` is the user's service, `F` its future.
    ///
    /// In this order: what admission decided, then the state, whose first variant is much
    /// smaller than the others, so that the bytes a new future occupies are one short run at
    /// the start (hyper copies that run into its slot, not the whole size).
    #[repr(C)]
    pub(crate) struct ConnResponseFuture<S, F, R: Runtime, Q> {
        admission: ConnAdmission<R>,
        #[pin]
        state: CallState<S, F, Q>,
    }
}

/// What admission decided for one request of a served connection (on the response future's
/// first poll).
struct ConnAdmission<R: Runtime> {
    /// Ends the response body; moves to it.
    end: BodyEnd<R>,
    /// The connection is busy with this request until its response ends; admission reaches
    /// the connection's decision through it.
    in_flight: Option<InFlight<R>>,
    /// Drawn at the goaway chance: the response ends its connection gracefully.
    close_connection: bool,
    /// Admission has happened.
    admitted: bool,
}

pin_project! {
    #[project = CallProj]
    enum CallState<S, F, Q> {
        /// To be admitted on the first poll (unless admitted already); the service is called
        /// once admitted and ready. The request stays here, unmoved, until the call.
        Start {
            service: S,
            req: Option<Q>,
        },
        /// The handler's future.
        Call {
            #[pin]
            future: F,
        },
        /// Answered by admission itself (health, rejections); `None` once returned.
        Answered {
            answer: Option<Box<LayerAnswer>>,
        },
        /// The service failed when it was asked for readiness at the call.
        Failed {
            error: Option<BoxError>,
        },
    }
}

impl<S, B, R, Q> ConnResponseFuture<S, S::Future, R, Q>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    R: Runtime,
    Q: RequestSlot,
{
    /// The response future for `req`, to be served by `service` (a clone of the
    /// connection's); the connection is busy until `in_flight` is dropped.
    ///
    /// A handler whose future is small (a closure that does not keep its request) is
    /// admitted and called here, as hyper hands over the request: the response future is
    /// then small too, and the request is dropped at the call. A larger one is admitted and
    /// called on the first poll, where the response future lies in hyper's slot, so that its
    /// future is built in place (see the module's documentation). The size is known at
    /// compile time: each service takes one of the two paths.
    #[inline(always)]
    pub(crate) fn new(in_flight: InFlight<R>, service: S, req: Request<Incoming>) -> Self {
        let admission = ConnAdmission {
            end: BodyEnd::new(None, in_flight.admission().runtime.clone()),
            in_flight: Some(in_flight),
            close_connection: false,
            admitted: false,
        };
        if Q::AT_CALL {
            return Self::started(admission, service, req);
        }
        // One straight construction, so that hyper's dispatcher can build it in its slot.
        ConnResponseFuture {
            admission,
            state: CallState::Start {
                service,
                req: Some(Q::keep(req)),
            },
        }
    }

    /// Admits `req` and, if it is to be served and `service` is ready, calls it.
    #[inline(always)]
    fn started(
        mut admission: ConnAdmission<R>,
        mut service: S,
        mut req: Request<Incoming>,
    ) -> Self {
        if let Some(answer) = admission.admit(&mut req) {
            let state = CallState::Answered {
                answer: Some(answer),
            };
            return ConnResponseFuture { admission, state };
        }
        // Each way builds the whole future where it is returned (a state built first would
        // be copied whole, request-sized, into it).
        match service.poll_ready(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(())) => ConnResponseFuture {
                admission,
                state: CallState::Call {
                    future: service.call(req),
                },
            },
            Poll::Ready(Err(e)) => ConnResponseFuture {
                admission,
                state: CallState::Failed {
                    error: Some(e.into()),
                },
            },
            // Waited for on the first poll, with the task's waker.
            Poll::Pending => ConnResponseFuture {
                admission,
                state: CallState::Start {
                    service,
                    req: Some(Q::keep(req)),
                },
            },
        }
    }

    #[inline(never)]
    fn poll_response_out_of_line(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<<Self as Future>::Output> {
        self.poll_response(cx)
    }

    #[inline(always)]
    fn poll_response(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<<Self as Future>::Output> {
        let mut this = self.project();
        let admission = this.admission;
        loop {
            match this.state.as_mut().project() {
                CallProj::Start { service, req: slot } => {
                    let Some(req) = slot else {
                        // Called once: the state changes right after.
                        return Poll::Pending;
                    };
                    if !admission.admitted {
                        if let Some(answer) = admission.admit(req.request()) {
                            let answer = Some(answer);
                            this.state.set(CallState::Answered { answer });
                            continue;
                        }
                    }
                    match service.poll_ready(cx) {
                        Poll::Ready(Ok(())) => {
                            let Some(req) = slot.take() else {
                                return Poll::Pending;
                            };
                            let future = service.call(req.into_request());
                            this.state.set(CallState::Call { future });
                            continue;
                        }
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                        Poll::Pending => {}
                    }
                }
                CallProj::Call { future } => {
                    if let Poll::Ready(result) = future.poll(cx) {
                        return Poll::Ready(match result {
                            Ok(response) => Ok(handler_response(
                                response,
                                &mut admission.end,
                                &mut admission.in_flight,
                                admission.close_connection,
                            )),
                            Err(e) => Err(e.into()),
                        });
                    }
                }
                CallProj::Answered { answer: slot } => {
                    // Polled after completion: stay pending rather than panic.
                    let Some(boxed) = slot.take() else {
                        return Poll::Pending;
                    };
                    let (response, tracker) = *boxed;
                    let in_flight = &mut admission.in_flight;
                    return Poll::Ready(Ok(answer(response, tracker, in_flight, false)));
                }
                CallProj::Failed { error } => {
                    return match error.take() {
                        Some(e) => Poll::Ready(Err(e)),
                        None => Poll::Pending,
                    };
                }
            }
            // The service or the handler is waiting: bounded by the request timeout.
            ready!(Pin::new(&mut admission.end).poll_deadline(cx));
            let close = admission.close_connection;
            return Poll::Ready(Ok(timed_out(&mut admission.in_flight, close)));
        }
    }
}

impl<R: Runtime> ConnAdmission<R> {
    /// Admits `req`: keeps what the response needs, or returns the answer of admission's own.
    #[inline(never)]
    fn admit(&mut self, req: &mut Request<Incoming>) -> Option<Box<LayerAnswer>> {
        self.admitted = true;
        // The guard leaves only with the response, which comes after admission; were it ever
        // gone, the request is refused (503, retry), never served unadmitted.
        let Some(in_flight) = self.in_flight.as_mut() else {
            let refused = http_response::<Bytes>(&lameduck::responses::SHUTTING_DOWN);
            return Some(Box::new((refused, None)));
        };
        match in_flight
            .admission()
            .admit(req, in_flight.connection_kind(), in_flight.arrival())
        {
            Admitted::Serve {
                tracker,
                close_connection,
            } => {
                // What bounds the request on a stopped connection: the request timeout from
                // the gate's close (the common case: nothing to note), the grace period, or
                // its own deadline when served after the close.
                match &tracker {
                    Some(t) if t.is_normal() => {}
                    Some(t) if t.is_long_running() => in_flight.set_long_running(),
                    _ => in_flight.set_served_late(),
                }
                self.end.set_tracker(tracker);
                self.close_connection = close_connection;
                None
            }
            Admitted::Answer(answer) => Some(answer),
        }
    }
}

impl<S, R, B, Q> Future for ConnResponseFuture<S, S::Future, R, Q>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    R: Runtime,
    Q: RequestSlot,
{
    type Output = Result<Response<LameduckBody<B, R>>, BoxError>;

    /// Inlined into hyper's dispatcher when the handler was started at the call (its future is
    /// small); a large handler future's poll stays out of line.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if Q::AT_CALL {
            self.poll_response(cx)
        } else {
            self.poll_response_out_of_line(cx)
        }
    }
}

/// The hyper service of one connection: hands each request, with a clone of the user's tower
/// service, to a response future that admits it and calls the service
/// ([`ConnResponseFuture`]); counts heads and responses for the header-read timeout; turns a `Connection: close`
/// response on HTTP/2 (which has no such header) into a GOAWAY for its connection, as Go's
/// HTTP/2 server does for kube-apiserver's 429s (see
/// [`InFlight::before_response`](crate::connection::head_watch::InFlight::before_response)).
pub(crate) struct ConnService<S, R: Runtime, Q> {
    service: S,
    activity: Arc<ConnActivity<R>>,
    /// Where a response future keeps its request until the call ([`RequestSlot`]).
    slot: PhantomData<fn() -> Q>,
}

impl<S, R: Runtime, Q> ConnService<S, R, Q> {
    /// The service of the connection whose requests and task share `activity`.
    pub(crate) fn new(service: S, activity: Arc<ConnActivity<R>>) -> Self {
        ConnService {
            service,
            activity,
            slot: PhantomData,
        }
    }
}

impl<S, R, Q, ResBody> hyper::service::Service<Request<Incoming>> for ConnService<S, R, Q>
where
    S: Service<Request<Incoming>, Response = Response<ResBody>> + Clone,
    S::Error: Into<BoxError>,
    R: Runtime,
    Q: RequestSlot,
    ResBody: http_body::Body<Data = Bytes>,
{
    type Response = Response<LameduckBody<ResBody, R>>;
    type Error = BoxError;
    type Future = ConnResponseFuture<S, S::Future, R, Q>;

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
