//! The cases, one module per behaviour. Each case is a `fn(&'static str)` taking the example
//! binary's name; `main.rs` stamps one `#[test]` per (binary, case).

mod arrivals;
mod bounds;
mod close_listener_mode;
mod conformance;
mod event_streams;
mod goaway_chance;
mod grpc;
mod hand_over;
mod health;
mod hooks;
mod http2;
mod metrics;
mod requests;
mod retry_after_mode;
mod signals;
mod startup;
mod systemd;
mod tls;
mod watch_drain;
mod websockets;

pub use arrivals::*;
pub use bounds::*;
pub use close_listener_mode::*;
pub use conformance::*;
pub use event_streams::*;
pub use goaway_chance::*;
pub use grpc::*;
pub use hand_over::*;
pub use health::*;
pub use hooks::*;
pub use http2::*;
pub use metrics::*;
pub use requests::*;
pub use retry_after_mode::*;
pub use signals::*;
pub use startup::*;
pub use systemd::*;
pub use tls::*;
pub use watch_drain::*;
pub use websockets::*;
