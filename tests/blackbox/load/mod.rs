//! Load at the moment of termination: the heavy black-box cases. They run in their
//! own test target (`tests/load.rs`), one at a time, against every example server.

pub mod client;
mod inflight;
mod misbehaving;
mod watch;

pub use inflight::*;
pub use misbehaving::*;
pub use watch::*;
