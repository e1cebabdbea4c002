//! The examples on axum: the example server `axum_server`
//! (`cargo run --release --example axum_server`) and the quick start `quickstart_axum`. They
//! are in a package of their own so that they build axum and none of the other runtimes'
//! frameworks (actix-web, tonic, smol); the code they share with the other example servers is
//! `lameduck-examples`'.
//!
//! This package is never published; its library is empty.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
