//! Helpers shared by the top-level examples and black-box tests of the lameduck workspace.
//!
//! This package is never published; it holds what every example server has in common
//! (`docs/design.md#example-servers`): flag parsing, logging, listeners, metrics and the
//! actix-web routes; the hyper-based servers' routes come from `lameduck-demo`
//! ([`routes`]).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod actix_routes;
pub mod flags;
pub mod grpc;
pub mod listen;
pub mod logging;
pub mod metrics;
/// The routes every hyper-based example server answers, shared with the demo.
pub use lameduck_demo::routes;
pub mod server;
pub mod tls;
pub mod websocket;
