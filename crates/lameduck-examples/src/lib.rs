//! What every example server of the lameduck workspace has in common
//! (`docs/design.md#example-servers`): flag parsing, logging, listeners, metrics, TLS and the
//! run around the routes; the hyper-based servers' routes come from `lameduck-demo`
//! ([`routes`]).
//!
//! This package is never published. It holds no runtime's framework: each example server's
//! package (`lameduck-examples-tokio`, `-axum`, `-smol`, `-actix`, `-grpc`) adds its own, so
//! that `cargo run --example tokio_server` builds neither actix-web nor tonic nor smol.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod flags;
pub mod listen;
pub mod logging;
pub mod metrics;
/// The routes every hyper-based example server answers, shared with the demo.
pub use lameduck_demo::routes;
pub mod server;
pub mod tls;
