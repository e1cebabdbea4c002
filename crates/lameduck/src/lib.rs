//! lameduck: kube-apiserver style graceful termination as a `no_std` state machine.
//!
//! On SIGTERM a service behind a load balancer must turn `/readyz` red at once while still
//! serving (the lame-duck window), run its pre-shutdown hooks, stop accepting, drain in-flight
//! requests, end long-running requests at a paced rate, stop listening and exit 0. This crate
//! is that sequence, and nothing else: no runtime, no clock, no I/O. Adapter crates bind it
//! to tokio/hyper, smol and actix-web.
//!
//! # What the root holds
//!
//! Only what a user of the core needs every day:
//!
//! * the configuration: [`Config`], [`ConfigBuilder`], [`ConfigError`], [`ShutdownMode`],
//!   and [`parse_duration`] for Go-style durations;
//! * the lifecycle: [`Machine`], the runtime-checked state machine of the whole DAG (inputs
//!   with the time passed in, [`Input`]; [`Event`]s out; [`Machine::poll_timeout`] for the
//!   next deadline; its module docs show the run loop an adapter writes), [`Lifecycle`] and
//!   its typestate stages [`Configuring`], [`Prepared`], [`Running`] over it, where it is
//!   ([`Phase`]), and its signals ([`LifecycleSignal`], [`LifecycleSignalFired`]);
//! * the shared state request tasks read: [`Shared`] and its [`Admission`] of a request;
//! * requests: [`RequestClass`], [`RequestInfo`], [`default_is_long_running`],
//!   [`ConnectionKind`];
//! * time: [`Instant`], [`StdClock`] (feature `std`);
//! * the reference model: [`check_trace`].
//!
//! # Where the rest is
//!
//! Everything else is reached through its module:
//!
//! * [`machine`]: the machine's vocabulary besides [`Input`] and [`Event`]: hook, listener
//!   and routes-ready ids, [`machine::StopSource`], [`machine::HookOutcome`], the errors;
//! * [`lifecycle`]: the typestate API ([`lifecycle::Stage`]);
//! * [`phase`]: what marks each [`Phase`], and which typestate type stands for it;
//! * [`shared`]: [`Shared`]'s parts: what it counts ([`shared::counters::Counters`], from
//!   [`Shared::counters`], and the counts it returns), owned tickets, health checks;
//! * [`gate`]: the admission gate, its tickets and [`gate::Rejection`];
//! * [`rejections`]: the counts of requests turned away, by reason;
//! * [`signal`]: [`LifecycleSignal`] and the sets and times of fired signals;
//! * [`health`]: the exact `/readyz`, `/livez`, `/healthz` bodies of kube-apiserver;
//! * [`config`], [`duration`]: every option and its errors, Go-style durations;
//! * [`classify`], [`connection`]: how requests and connections are told apart and bounded;
//! * [`responses`]: the canned responses of rejections;
//! * [`time`]: the clock-free [`Instant`] and conversions;
//! * [`trace`]: the reference model's events, rules and violations.
//!
//! Features add what is not the core:
//! * `summary`: `lameduck::summary`, the one-line account of a termination that a driver
//!   logs at the exit, and its parser (every adapter enables it);
//! * `metrics`: `lameduck::metrics`, the lifecycle's series through the `metrics` facade;
//! * `planner`: `lameduck::plan`, the shutdown planner's arithmetic (`lameduck-cli plan`);
//! * `testing`, a kit for `[dev-dependencies]`: the simulator `lameduck::sim`, and
//!   `lameduck::trace::log`, which parses the hyper adapter's log into a trace.
//!
//! The crate is `no_std` with `alloc`. The `std` feature (default) only adds
//! `StdClock`, `std::error::Error` impls and blocking waits.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod classify;
pub mod config;
pub mod connection;
pub mod duration;
pub mod gate;
pub mod health;
pub mod lifecycle;
pub mod machine;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod phase;
#[cfg(feature = "planner")]
pub mod plan;
pub mod rejections;
pub mod responses;
pub mod shared;
pub mod signal;
#[cfg(feature = "testing")]
pub mod sim;
#[cfg(feature = "summary")]
pub mod summary;
mod sync;
pub mod time;
pub mod trace;

pub use classify::{default_is_long_running, RequestClass, RequestInfo};
pub use config::{Config, ConfigBuilder, ConfigError, ShutdownMode};
pub use connection::ConnectionKind;
pub use duration::parse_duration;
pub use lifecycle::{Configuring, Lifecycle, Prepared, Running};
pub use machine::{Event, Input, Machine};
pub use phase::Phase;
pub use shared::signals::LifecycleSignalFired;
pub use shared::{Admission, Shared};
pub use signal::LifecycleSignal;
pub use time::Instant;
#[cfg(feature = "std")]
pub use time::StdClock;
pub use trace::check_trace;
