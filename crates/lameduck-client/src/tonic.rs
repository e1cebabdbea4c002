//! tonic's `Channel`, moved to a new connection after a GOAWAY.
//!
//! A tonic `Channel` keeps one HTTP/2 connection and makes a new one only once that
//! connection has closed. After the server's GOAWAY the connection stays open while its
//! streams in flight finish (seconds, for a slow call or a stream), and every call made
//! meanwhile goes to it and is refused (h2's GOAWAY error) or cancelled unsent. A retry on
//! the same `Channel` meets the same connection. [`FreshChannel`] makes a new `Channel` (a new
//! connection) as soon as one of its calls is refused that way; the calls already in flight on
//! the old one finish there.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use tonic::body::Body;
use tonic::transport::{Channel, Endpoint};
use tower_service::Service;

use crate::classify::classify_error;
use crate::stats::RetryReason;

type MakeChannel = dyn Fn() -> Channel + Send + Sync;

struct Shared {
    make: Box<MakeChannel>,
    /// Bumped each time a new channel replaces the current one.
    generation: AtomicU64,
    current: Mutex<(u64, Channel)>,
}

impl Shared {
    /// Replaces the channel of `generation` (the one a refused call went through) with a new
    /// one, unless another refused call did it already.
    fn renew(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.0 == generation {
            let next = (generation + 1, (self.make)());
            *current = next;
            self.generation.store(generation + 1, Ordering::Release);
            tracing::debug!(
                generation = generation + 1,
                "lameduck-client: a GOAWAY refused a call; later calls go on a new connection"
            );
        }
    }
}

/// A tonic channel that moves to a new connection as soon as the server's GOAWAY refuses one
/// of its calls (or hyper cancels one unsent on the closing connection): the calls that
/// follow, retries included, go on the new connection. Use it under [`RetryLayer`](crate::RetryLayer):
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use lameduck_client::{FreshChannel, RetryLayer};
/// use tonic::transport::Endpoint;
/// use tower::ServiceBuilder;
///
/// let channel = FreshChannel::new(Endpoint::from_static("http://127.0.0.1:50051"));
/// let service = ServiceBuilder::new().layer(RetryLayer::default()).service(channel);
/// let mut health = tonic_health::pb::health_client::HealthClient::new(service);
/// # let _ = &mut health; Ok(()) }
/// ```
///
/// Its clones share the current channel. Each channel is made with `connect_lazy` (inside a
/// tokio runtime, as tonic needs).
#[derive(Clone)]
pub struct FreshChannel {
    shared: Arc<Shared>,
    generation: u64,
    channel: Channel,
}

impl FreshChannel {
    /// Channels of `endpoint`, each connected lazily.
    pub fn new(endpoint: Endpoint) -> Self {
        FreshChannel::from_fn(move || endpoint.connect_lazy())
    }

    /// Channels made by `make` (for example with a connector of the application's:
    /// `endpoint.connect_with_connector_lazy(connector.clone())`), each connected lazily.
    pub fn from_fn(make: impl Fn() -> Channel + Send + Sync + 'static) -> Self {
        let channel = make();
        FreshChannel {
            shared: Arc::new(Shared {
                make: Box::new(make),
                generation: AtomicU64::new(0),
                current: Mutex::new((0, channel.clone())),
            }),
            generation: 0,
            channel,
        }
    }

    /// How many times a new channel replaced the current one.
    pub fn renewals(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for FreshChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshChannel")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Service<http::Request<Body>> for FreshChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = FreshFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.shared.generation.load(Ordering::Acquire) != self.generation {
            let current = self
                .shared
                .current
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.generation = current.0;
            self.channel = current.1.clone();
        }
        self.channel.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> FreshFuture {
        FreshFuture {
            inner: self.channel.call(request),
            shared: Arc::clone(&self.shared),
            generation: self.generation,
        }
    }
}

/// The response future of [`FreshChannel`].
pub struct FreshFuture {
    inner: <Channel as Service<http::Request<Body>>>::Future,
    shared: Arc<Shared>,
    generation: u64,
}

impl Future for FreshFuture {
    type Output = Result<http::Response<Body>, tonic::transport::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = ready!(Pin::new(&mut self.inner).poll(cx));
        if let Err(e) = &result {
            if matches!(
                classify_error(e),
                Some(RetryReason::Refused | RetryReason::Unsent)
            ) {
                self.shared.renew(self.generation);
            }
        }
        Poll::Ready(result)
    }
}

impl std::fmt::Debug for FreshFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshFuture").finish_non_exhaustive()
    }
}
