//! The examples on tokio + hyper: the example server `tokio_server`
//! (`cargo run --release --example tokio_server`), the quick starts `quickstart_tokio`,
//! `quickstart_tls` and `quickstart_core`. They are in a package of their own so that they
//! build tokio's and hyper's crates and none of the other runtimes' frameworks (axum,
//! actix-web, tonic, smol); the code they share with the other example servers is
//! `lameduck-examples`'.
//!
//! This package is never published; its library is empty.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
