//! The layer and its service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use crate::body::ReplayBody;
use crate::classify::is_grpc;
use crate::config::{ConfigError, Policy, RetryLayerBuilder};
use crate::future::{ResponseFuture, RetryState};
use crate::stats::RetryStats;

/// The tower layer that makes a [`Retry`] of a service (see the crate's description for what
/// it retries). Cheap to clone; every service it makes shares its configuration, budget and
/// [`RetryStats`].
#[derive(Clone)]
pub struct RetryLayer {
    policy: Arc<Policy>,
}

impl Default for RetryLayer {
    /// The builder's defaults: 3 attempts, waits up to 10 s honoured, tower's default budget,
    /// a backoff from 20 ms to 1 s, bodies up to 64 KiB replayed, RFC 9110's idempotent
    /// methods, tokio's timer.
    fn default() -> Self {
        RetryLayer::from_policy(Policy::default())
    }
}

impl RetryLayer {
    /// The builder of a layer.
    pub fn builder() -> RetryLayerBuilder {
        RetryLayerBuilder::default()
    }

    pub(crate) fn from_policy(policy: Policy) -> Self {
        RetryLayer {
            policy: Arc::new(policy),
        }
    }

    /// The counts of this layer's services (shared; read them at any time).
    pub fn stats(&self) -> RetryStats {
        self.policy.stats.clone()
    }
}

impl std::fmt::Debug for RetryLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryLayer")
            .field("max_attempts", &self.policy.max_attempts)
            .field("max_wait", &self.policy.max_wait)
            .field("body_limit", &self.policy.body_limit)
            .finish_non_exhaustive()
    }
}

impl RetryLayerBuilder {
    /// The layer, or what is wrong with the configuration.
    pub fn build(self) -> Result<RetryLayer, ConfigError> {
        self.policy().map(RetryLayer::from_policy)
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            policy: Arc::clone(&self.policy),
        }
    }
}

/// A service that retries what its server provably did not process (see the crate's
/// description). Made by [`RetryLayer`].
///
/// The inner service must be `Clone`: a retry goes through a clone of it, made ready again.
/// Its error must be a `std::error::Error` (hyper-util's and tonic's are), read to tell a
/// refused or unsent request from any other failure; it is returned as it came.
#[derive(Clone)]
pub struct Retry<S> {
    inner: S,
    policy: Arc<Policy>,
}

impl<S> Retry<S> {
    /// `inner` with `layer`'s configuration.
    pub fn new(inner: S, layer: &RetryLayer) -> Self {
        layer.layer(inner)
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, the layer gone.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The counts of the layer this service came from.
    pub fn stats(&self) -> RetryStats {
        self.policy.stats.clone()
    }
}

impl<S> std::fmt::Debug for Retry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retry").finish_non_exhaustive()
    }
}

impl<S, B, ResB> Service<Request<B>> for Retry<S>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    S::Error: std::error::Error + 'static,
    B: ReplayBody,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.policy.deposit();
        let grpc = is_grpc(request.headers());
        if self.policy.max_attempts <= 1 {
            return ResponseFuture::new(self.inner.call(request), None, &self.policy, grpc);
        }
        let (parts, body) = request.into_parts();
        let (body, saved) = body.prepare(self.policy.body_limit);
        // Only a request whose body can be sent again keeps what a retry needs: a clone of
        // the service (the ready one sends the first attempt) and of the request's head.
        let retry = saved.map(|saved| RetryState::new(self.inner.clone(), &parts, saved));
        let first = self.inner.call(Request::from_parts(parts, body));
        ResponseFuture::new(first, retry, &self.policy, grpc)
    }
}
