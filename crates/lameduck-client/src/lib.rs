//! The client half of lameduck's graceful termination: a tower layer that retries exactly what
//! a server provably did not process, and nothing else.
//!
//! A lameduck server (and Go's `net/http`, and any HTTP/2 server that follows RFC 9113) says
//! precisely which requests it did not process while it shuts down: an HTTP/2 stream above the
//! last-stream-id of its GOAWAY, a stream reset with `REFUSED_STREAM`, a `429` or `503` with
//! `Retry-After`, a gRPC `UNAVAILABLE` with `grpc-retry-pushback-ms`. grpc-go and Go's
//! `net/http` retry those on their own; Rust's clients (hyper-util's `Client`, tonic's
//! `Channel`) do not. [`RetryLayer`] does, for any
//! `tower::Service<http::Request<B>>` that answers `http::Response<_>`:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use http_body_util::Empty;
//! use hyper::body::Bytes;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use lameduck_client::RetryLayer;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! let mut client = ServiceBuilder::new().layer(RetryLayer::default()).service(client);
//! let request = http::Request::get("http://127.0.0.1:8080/").body(Empty::new())?;
//! let response = client.ready().await?.call(request).await?;
//! # let _ = response; Ok(()) }
//! ```
//!
//! What is retried, and why (docs/client.md has the references):
//!
//! | the failure | methods retried | wait |
//! |---|---|---|
//! | HTTP/2: a stream above a GOAWAY's last-stream-id, or opened as the GOAWAY came | every method | backoff |
//! | HTTP/2: `RST_STREAM` with `REFUSED_STREAM` | every method | backoff |
//! | never sent (hyper cancelled it on a closing connection), or the connection was refused | every method | backoff |
//! | the connection closed or was reset before the response's head | idempotent or [`Retryable`] | backoff |
//! | `429` or `503` with `Retry-After` (seconds or an HTTP-date) | idempotent or [`Retryable`] | as told, up to the maximum |
//! | gRPC `UNAVAILABLE` (trailers-only) with `grpc-retry-pushback-ms` | [`Retryable`] or a configured idempotent service | as told, up to the maximum |
//!
//! A response whose head arrived is never retried for an error that came later (its body's
//! error is the caller's), and a request whose body cannot be replayed (a stream, or larger
//! than the configured limit) is never sent twice: its failure is returned exactly as it came.
//! Retries are bounded by a maximum of attempts and a budget (tower's `TpsBudget`: each
//! request deposits, each retry withdraws), counted through the `metrics` facade
//! ([`describe_metrics`]) and in [`RetryStats`], and each is a `tracing` debug event.
//!
//! With the `tonic` feature, tonic's request body is replayed (a unary call's message is
//! collected as it is sent, up to the limit), so the layer wraps tonic's `Channel`:
//! `HealthClient::new(ServiceBuilder::new().layer(RetryLayer::default()).service(channel))`.
//! A call refused by a GOAWAY, or cancelled unsent on the closing connection, makes tonic's
//! `Channel` drop that connection, so the retry goes on a new one.

#![deny(missing_docs)]

mod body;
mod classify;
mod config;
mod future;
mod service;
mod stats;
mod timer;

pub use body::{Collected, ReplayBody};
pub use classify::{classify_error, retry_after};
pub use config::{ConfigError, RetryLayerBuilder};
pub use future::ResponseFuture;
pub use service::{Retry, RetryLayer};
pub use stats::{describe_metrics, RetryReason, RetryStats, SkipReason};
pub use timer::{Timer, TokioTimer};

/// A request extension that marks one request safe to send twice: the layer then retries it
/// in the cases it retries only for idempotent methods (a connection closed before the
/// response, `429`/`503` with `Retry-After`, gRPC `UNAVAILABLE` with a pushback).
///
/// ```
/// let mut request = http::Request::post("http://127.0.0.1:8080/orders").body(()).unwrap();
/// request.extensions_mut().insert(lameduck_client::Retryable);
/// ```
///
/// With tonic, `tonic::Request::extensions_mut().insert(Retryable)` does the same for a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retryable;
