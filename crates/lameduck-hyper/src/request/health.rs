//! A tower service answering the health endpoints, for routers that mount them explicitly.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use lameduck::{Shared, StdClock};
use tower_service::Service;

use crate::request::response::http_response;
use crate::runtime::Runtime;

/// A tower service answering the health endpoints from the lifecycle, for routers that mount
/// health routes explicitly (use it with
/// [`AdmissionLayer::serve_health`](crate::AdmissionLayer::serve_health)`(false)`).
/// Paths that are not health paths get 404.
#[derive(Clone)]
pub struct HealthService<R: Runtime> {
    shared: Arc<Shared>,
    runtime: R,
    clock: StdClock,
}

impl<R: Runtime> fmt::Debug for HealthService<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthService").finish_non_exhaustive()
    }
}

impl<R: Runtime> HealthService<R> {
    /// A health service for `shared`'s lifecycle.
    #[must_use]
    pub fn new(shared: Arc<Shared>, runtime: R, clock: StdClock) -> Self {
        HealthService {
            shared,
            runtime,
            clock,
        }
    }
}

impl<R: Runtime, B> Service<Request<B>> for HealthService<R> {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let now = self.clock.instant(self.runtime.now());
        let response = match self.shared.health(req.uri().path(), req.uri().query(), now) {
            Some(health) => http_response(health),
            None => {
                let mut res = Response::new(Full::new(Bytes::from_static(b"404 page not found\n")));
                *res.status_mut() = StatusCode::NOT_FOUND;
                res
            }
        };
        std::future::ready(Ok(response))
    }
}
