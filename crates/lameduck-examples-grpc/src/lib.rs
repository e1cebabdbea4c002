//! What grpc_server adds to the example servers' shared code (`lameduck-examples`): the gRPC
//! service `lameduck.example.Demo` and its client ([`grpc`]). The package also holds the
//! examples on tonic (`grpc_server`, the load client `grpc_load`, `quickstart_tonic`), so that
//! they build tonic's crates and not the other runtimes' frameworks (actix-web, smol).
//!
//! This package is never published.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod grpc;
