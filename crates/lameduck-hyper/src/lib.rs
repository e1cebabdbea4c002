//! Runtime-agnostic hyper 1 and tower glue for [`lameduck`].
//!
//! Everything the tokio and smol adapters share lives here, written once against two small
//! traits ([`Runtime`], [`Listener`]):
//!
//! * [`Builder`] / [`Server`]: the lifecycle driver. It runs the core
//!   [`Machine`](lameduck::Machine) with the runtime's clock, runs hooks concurrently (a
//!   failure or panic is reported by name), serves hyper connections (HTTP/1.1 and HTTP/2 on
//!   one port) on any number of listeners, stops them at the DAG point of the mode, shuts
//!   connections down gracefully (HTTP/1 `Connection: close`, HTTP/2 GOAWAY), stops waiting
//!   for them (closing none) at the HTTP shutdown timeout, sends systemd notifications and
//!   logs every signal.
//! * [`AdmissionLayer`]: the tower layer (so axum works) that classifies requests (normal,
//!   long-running, exempt), rejects them with 503/429 once the gate closes, bounds normal
//!   requests by the request timeout (504 before the head, the response aborted after it),
//!   serves the health endpoints, hands long-running handlers a [`ShutdownNotice`], and keeps
//!   every request counted until its response body ends (long-running ones until their
//!   paced turn). A gRPC call (content-type `application/grpc*`) is rejected in gRPC form
//!   ([`grpc`]: `UNAVAILABLE`, trailers-only, with `grpc-retry-pushback-ms`), and a
//!   long-running body's trailers (a gRPC stream's status) wait for its paced turn.
//!
//! * [`Server::serve_tls`] with a [`Handshake`]: connections that go through a handshake
//!   (TLS) before HTTP, each in its own task and bounded, the protocol chosen by ALPN
//!   ([`Alpn`]); the tokio and smol adapters' `TlsAcceptor`s implement it with rustls.
//!
//! Adapters supply only their runtime's timer, spawner, OS signals and I/O types. An adapter
//! whose HTTP server is not hyper (actix-web's) admits requests and ends connections in its own
//! server with the pieces gathered in [`adapter`], the contract it is written against.
//!
//! # Features
//!
//! * `metrics`: records the lifecycle's series (phase, requests in flight, rejections by
//!   reason, signal times, drain durations, hook outcomes) through the `metrics` facade at
//!   lifecycle events, never per request; call `lameduck::metrics::record_state` in your
//!   `/metrics` handler before the exporter renders. Without it nothing of `metrics` is built.
//!
//! Every step of a termination is logged through `tracing` (install a subscriber, such as
//! `tracing_subscriber::fmt()`, to see it), ending with a one-line termination summary.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// The modules follow the architecture. `builder` prepares a `server`, whose `Server::run`
// hands everything to the run loop (`run`, with its `hooks`, the process's `os_signals`, the
// hand-over's `succession` and the exit's `report`), which turns the core's events into
// effects. Each listener is an accept loop (`connection::accept`) serving connections
// (`connection`: protocol detection, HTTP/2 I/O, header-read timeout, the linger at the stop,
// tracking). Each request goes through the admission layer (`request`: its settings, the
// gate's tickets held by the response body, deadlines, the lifecycle's own responses and the
// health endpoints). `sockets` holds inherited and handed-over listening sockets, `handle`
// controls a server from elsewhere, `logging` writes every line, and `runtime` is the seam to
// an async runtime. `adapter` re-exports, for adapters whose server is not hyper (actix-web),
// the pieces of `request`, `connection` and `arrivals` they use, and holds the HTTP/2 frame
// layout (`adapter::h2_frames`) that both the hyper connections and actix's GOAWAY watcher read.
pub mod adapter;
mod arrivals;
mod builder;
mod connection;
mod error;
mod flag;
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc;
mod handle;
mod logging;
mod request;
mod run;
mod runtime;
mod server;
pub mod sockets;
pub mod sse;
pub mod websocket;

pub use builder::{Builder, Hook};
pub use connection::context::ListenerContext;
pub use connection::handshake::{Alpn, Handshake};
pub use connection::tracker::{ConnectionGuard, ConnectionTracker};
pub use connection::HttpService;
pub use error::{BoxError, ServeError};
pub use handle::Handle;
pub use request::admission::{AdmissionFuture, AdmissionService};
pub use request::body::{LameduckBody, ResponseTimedOut};
pub use request::health::HealthService;
pub use request::layer::AdmissionLayer;
pub use request::notice::ShutdownNotice;
pub use request::ticket::{request_timeout, take_upgrade_ticket, UpgradeTicket};
pub use runtime::{BoxFuture, Exec, Listener, OsSignal, Runtime};
pub use server::Server;
