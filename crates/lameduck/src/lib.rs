//! lameduck: kube-apiserver style graceful termination as a `no_std` state machine.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod config;
pub mod duration;
pub mod signal;
pub mod time;

pub use config::{Config, ConfigBuilder, ConfigError, ConfigOption, ShutdownMode};
pub use duration::{format_duration, parse_duration, DurationError, GoDuration};
pub use signal::{Signal, SignalSet, SignalTimes};
pub use time::Instant;
#[cfg(feature = "std")]
pub use time::StdClock;
