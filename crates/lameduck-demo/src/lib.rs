//! The demo of the lameduck crate family (`examples/demo.rs`, run with
//! `cargo run --example demo`), and the routes every hyper-based example server answers
//! (`docs/design.md#example-servers`).
//!
//! This package is never published. It is separate from the example servers' package so that
//! the demo builds only the core, lameduck-hyper, lameduck-tokio, tokio, hyper and
//! tokio-tungstenite.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod response;
pub mod routes;
pub mod websocket;
