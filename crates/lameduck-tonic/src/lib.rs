//! gRPC services ([tonic]) over [`lameduck_tokio`]: kube-apiserver's graceful termination
//! with gRPC answers (`docs/design.md#grpc`).
//!
//! * **Health**: [`Grpc::health`] drives tonic-health's [`HealthReporter`]: `SERVING` while
//!   the server is ready, `NOT_SERVING` from `ShutdownInitiated` on (the gRPC form of
//!   `/readyz`, which Kubernetes' gRPC probes read), for the empty service name and every
//!   service named, while calls are still served during the shutdown delay.
//! * **Rejections** after the gate closes are `UNAVAILABLE`, trailers-only (HTTP 200), with
//!   `grpc-retry-pushback-ms` carrying the Retry-After (the server itself answers them in
//!   gRPC form, from the request's content-type).
//! * **Deadlines**: a unary call that has not answered by `min(grpc-timeout, request
//!   timeout)` gets `DEADLINE_EXCEEDED`, trailers-only ([`GrpcLayer`]).
//! * **Streaming calls are long-running**: the methods named with [`Grpc::streaming`] (and
//!   tonic-health's `Watch`) are tracked as long-running: no request timeout, told to end at
//!   `NotAcceptingNewRequest` through the [`ShutdownNotice`] in their request extensions
//!   ([`shutdown_notice`]), their final status held to the paced drain rate.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let (reporter, health) = tonic_health::server::health_reporter();
//! let routes = tonic::service::Routes::new(health); // .add_service(YourServer::new(..))
//! let mut server = lameduck_tokio::builder(lameduck::Config::default()).prepare();
//! let listener = lameduck_tokio::bind("127.0.0.1:50051".parse()?).await?;
//! lameduck_tonic::Grpc::new()
//!     .streaming("/your.package.Service/StreamingMethod")
//!     .health(reporter, ["your.package.Service"])
//!     .serve(&mut server, "grpc", listener, routes)?;
//! std::process::exit(server.run().await?.into());
//! # }
//! ```
//!
//! gRPC has no marker of a method's kind on the wire, so streaming methods are named by
//! their path (`/package.Service/Method`), the same path tonic routes by.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// `Grpc` (here) configures and serves; `deadline` is the layer around the tonic service,
// whose responses carry a `body` of its own; `health` drives tonic-health's reporter.
mod body;
mod deadline;
mod health;

use std::net::SocketAddr;
use std::sync::Arc;

use lameduck::RequestInfo;
use lameduck_hyper::{Handshake, HttpService, Listener, ServeError, Server};
use lameduck_tokio::TokioRuntime;
use tonic_health::server::HealthReporter;
use tower_layer::Layer;

pub use body::GrpcBody;
pub use deadline::{grpc_timeout, GrpcFuture, GrpcLayer, GrpcService};
pub use health::{HealthDriver, READINESS_INTERVAL};
pub use lameduck_hyper::ShutdownNotice;

/// The path of tonic-health's streaming `Watch` method, long-running and ended by the
/// server at `NotAcceptingNewRequest`.
pub const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";

/// The [`ShutdownNotice`] of a long-running call, from a tonic handler's request: resolves
/// at `NotAcceptingNewRequest`, when the stream should end with status OK. `None` for a
/// call that is not long-running.
#[must_use]
pub fn shutdown_notice<T>(request: &tonic::Request<T>) -> Option<ShutdownNotice> {
    request.extensions().get::<ShutdownNotice>().cloned()
}

type Fallback = Arc<dyn Fn(&RequestInfo<'_>) -> bool + Send + Sync>;

/// Serves a tonic service through a lameduck server: which calls are long-running, which
/// health reporter to drive; the crate docs show it in use.
#[derive(Clone)]
pub struct Grpc {
    streaming: Vec<String>,
    fallback: Fallback,
    health: Option<(HealthReporter, Vec<String>)>,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc")
            .field("streaming", &self.streaming)
            .field("health", &self.health.as_ref().map(|h| &h.1))
            .finish_non_exhaustive()
    }
}

impl Default for Grpc {
    fn default() -> Self {
        Self::new()
    }
}

impl Grpc {
    /// tonic-health's `Watch` as the only streaming method; other (non-gRPC) requests
    /// classified by [`lameduck::default_is_long_running`].
    #[must_use]
    pub fn new() -> Self {
        Grpc {
            streaming: vec![HEALTH_WATCH.to_string()],
            fallback: Arc::new(lameduck::default_is_long_running),
            health: None,
        }
    }

    /// Marks the method at `path` (`/package.Service/Method`) as streaming (server-streaming
    /// or bidi): long-running.
    #[must_use]
    pub fn streaming(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        if !self.streaming.contains(&path) {
            self.streaming.push(path);
        }
        self
    }

    /// How requests that are not calls of a streaming method are classified (default:
    /// [`lameduck::default_is_long_running`]), for servers that also serve plain HTTP.
    #[must_use]
    pub fn long_running(
        mut self,
        is_long_running: impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Arc::new(is_long_running);
        self
    }

    /// Drives `reporter` from the lifecycle for the empty service name and `services`
    /// (their full names, `package.Service`); see [`HealthDriver`].
    #[must_use]
    pub fn health(
        mut self,
        reporter: HealthReporter,
        services: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.health = Some((reporter, services.into_iter().map(Into::into).collect()));
        self
    }

    /// The classifier: a call of a streaming method, or what the fallback says.
    pub fn classifier(&self) -> impl Fn(&RequestInfo<'_>) -> bool + Send + Sync + 'static {
        let streaming: Arc<[String]> = self.streaming.clone().into();
        let fallback = Arc::clone(&self.fallback);
        move |info: &RequestInfo<'_>| streaming.iter().any(|p| p == info.path) || fallback(info)
    }

    /// Serves `service` (a tonic `Routes`, or any service with a `Default` body such as
    /// `tonic::body::Body`) on `listener` as part of `server`'s lifecycle: classifies with
    /// [`Grpc::classifier`] (for every listener served from now on), wraps `service` in a
    /// [`GrpcLayer`], and starts the [`HealthDriver`] if [`Grpc::health`] was given. Call it
    /// inside the tokio runtime.
    pub fn serve<L, S>(
        self,
        server: &mut Server<TokioRuntime>,
        name: &str,
        listener: L,
        service: S,
    ) -> Result<SocketAddr, ServeError>
    where
        L: Listener,
        GrpcService<S>: HttpService,
    {
        self.serve_with(server, service, |server, service| {
            server.serve(name, listener, service)
        })
    }

    /// Serves `service` on `listener` as [`Grpc::serve`] does, over TLS: every connection
    /// goes through `handshake` first (`lameduck_tokio::TlsAcceptor`, whose ALPN offers
    /// `h2`), in its own task; see `Server::serve_tls`.
    pub fn serve_tls<L, H, S>(
        self,
        server: &mut Server<TokioRuntime>,
        name: &str,
        listener: L,
        handshake: H,
        service: S,
    ) -> Result<SocketAddr, ServeError>
    where
        L: Listener,
        H: Handshake<L::Io>,
        GrpcService<S>: HttpService,
    {
        self.serve_with(server, service, |server, service| {
            server.serve_tls(name, listener, handshake, service)
        })
    }

    /// Classifies, wraps `service`, has `serve` serve it, and starts the health driver.
    fn serve_with<S>(
        self,
        server: &mut Server<TokioRuntime>,
        service: S,
        serve: impl FnOnce(&mut Server<TokioRuntime>, GrpcService<S>) -> Result<SocketAddr, ServeError>,
    ) -> Result<SocketAddr, ServeError> {
        server.long_running(self.classifier());
        let layer = GrpcLayer::new(
            Arc::clone(server.shared()),
            [HEALTH_WATCH.to_string()].into(),
        );
        let addr = serve(server, layer.layer(service))?;
        if let Some((reporter, services)) = self.health {
            HealthDriver::new(
                reporter,
                services,
                Arc::clone(server.shared()),
                server.clock(),
            )
            .spawn();
        }
        Ok(addr)
    }
}
