//! Helpers shared by the top-level examples and black-box tests of the lameduck workspace.
//!
//! This package is never published; it holds what every example server has in common
//! (`docs/design.md#example-servers`): flag parsing, logging, and the demo routes for
//! hyper-based servers.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod actix_routes;
pub mod flags;
pub mod grpc;
pub mod listen;
pub mod logging;
pub mod metrics;
pub mod routes;
pub mod server;
pub mod tls;
