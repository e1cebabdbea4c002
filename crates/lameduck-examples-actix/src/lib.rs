//! What actix_server adds to the example servers' shared code (`lameduck-examples`): the
//! example routes for actix-web ([`actix_routes`]). The package also holds the examples on
//! actix-web (`actix_server`, `quickstart_actix`), so that they build actix-web's crates and
//! not the other runtimes' frameworks (axum, tonic, smol).
//!
//! This package is never published.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod actix_routes;
