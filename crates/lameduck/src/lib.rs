//! lameduck: kube-apiserver style graceful termination as a `no_std` state machine.
//!
//! On SIGTERM a service behind a load balancer must turn `/readyz` red at once while still
//! serving (the lame-duck window), run its pre-shutdown hooks, stop accepting, drain in-flight
//! requests, end long-running requests at a paced rate, stop listening and exit 0. This crate
//! is that sequence, and nothing else: no runtime, no clock, no I/O. Adapter crates bind it
//! to tokio/hyper, smol and actix-web.
//!
//! * [`Machine`]: the runtime-checked state machine of the whole DAG; inputs with the time
//!   passed in, [`Event`]s out, [`Machine::poll_timeout`] for the next deadline. Its module
//!   docs show the run loop an adapter writes.
//! * [`Lifecycle`]: the typestate API over it (configure → prepare → run).
//! * [`Shared`]: what request tasks read concurrently: the admission [`Gate`], health
//!   answers, and futures for signals.
//! * [`health`]: the exact `/readyz`, `/livez`, `/healthz` bodies of kube-apiserver.
//! * [`config`] and [`duration`]: validated configuration and Go-style durations.
//! * [`trace`]: the reference model, [`check_trace`], for testing a service's observed
//!   behaviour.
//! * [`rejections`]: the counts of requests turned away, by reason.
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
//! [`StdClock`], `std::error::Error` impls and blocking waits.
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
pub use config::{Config, ConfigBuilder, ConfigError, ConfigOption, GoawayChance, ShutdownMode};
pub use connection::{ConnectionKind, IDLE_CONNECTION_LINGER};
pub use duration::{parse_duration, DurationError};
pub use gate::{Gate, InFlight, LongRunningTicket, NormalTicket, Rejection};
pub use health::{CheckOutcome, Endpoint, HealthQuery, HealthResponse, HealthTarget};
pub use lifecycle::{Configuring, Lifecycle, Prepared, Running, Stage};
pub use machine::{
    DrainPlan, Event, ExitReason, HandOverOutcome, HookId, HookKind, HookOutcome, Input,
    InputError, ListenerId, Machine, RegisterError, RoutesReadyId, StopSource,
};
pub use phase::Phase;
pub use rejections::{RejectionCounts, RejectionReason};
pub use shared::signals::LifecycleSignalFired;
pub use shared::{
    Admission, ArrivalCounts, CheckFn, EndpointSet, GoodbyeCounts, RequestArrival, Shared,
};
pub use signal::{LifecycleSignal, SignalSet, SignalTimes};
pub use time::Instant;
#[cfg(feature = "std")]
pub use time::StdClock;
pub use trace::{check_trace, Rule, TraceEvent, TraceSummary, TracedEvent, Violation};
