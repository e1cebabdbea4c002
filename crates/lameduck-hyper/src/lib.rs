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
//!   requests by the request timeout (504 before the head, the response aborted after it), serves the health endpoints, hands long-running handlers a
//!   [`ShutdownSignal`], and keeps every request counted until its response body ends
//!   (long-running ones until their paced slot).
//!
//! Adapters supply only their runtime's timer, spawner, signals and I/O types.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod adapter;
mod admission;
mod body;
mod conn;
mod error;
mod flag;
mod response;
mod runtime;
mod server;
mod ticket;

pub use admission::{
    decide, request_info, request_timeout, AdmissionFuture, AdmissionLayer, AdmissionService,
    Classifier, Decision, HealthService, RequestExtensions, ShutdownSignal,
};
pub use body::{BodyEnd, LameduckBody, ResponseTimedOut};
pub use error::{BoxError, ServeError};
pub use response::{http_response, LifecycleResponse};
pub use runtime::{BoxFuture, Exec, Listener, OsSignal, Runtime};
pub use server::{
    Builder, ConnectionGuard, ConnectionTracker, Handle, Hook, HttpService, ListenerContext,
    Server, DESTROY_HOOKS_TIMEOUT,
};
pub use ticket::{take_upgrade_ticket, RequestTracker, UpgradeTicketSlot};
