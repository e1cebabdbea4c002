//! Shared code of lameduck's peer benchmarks (see `BENCHMARKS.md`).
//!
//! * `src/bin/bare_*.rs`: the *bare* baseline servers (hyper on tokio, axum, actix-web,
//!   hyper on smol). They serve the same routes as the example servers of the repository
//!   (`/` → `ok`, `/sleep?duration=D`, `/watch`), with the same route handlers where the
//!   example shares them (`lameduck_examples::routes`), but without lameduck: no admission
//!   layer, no lifecycle driver. Each prints `listening on http://ADDR` like the examples
//!   (`bare_hyper_tls`, the same over TLS: `listening on https://ADDR`).
//! * `src/bin/bench_*.rs`: the harnesses that start servers, load them, signal them and
//!   measure (termination latency, drain pacing, scale, a fixed-count load generator).
//! * `benches/hot_path.rs`: the criterion bench of the admission hot path against peers.
//!
//! This module holds the pieces those binaries share: flag parsing, starting a server and
//! timing its exit from the parent that reaps it, a small raw HTTP/1.1 client, statistics
//! and SVG plotting.
#![deny(unsafe_code)]

pub mod args;
pub mod hot;
pub mod http1;
pub mod load;
pub mod proc;
pub mod stats;
pub mod svg;
pub mod tls;

use std::io::Write;
use std::net::SocketAddr;

/// Prints the `listening on http://ADDR` line the harnesses wait for (the same line the
/// example servers print) and flushes stdout.
pub fn announce(addr: SocketAddr) {
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
}

/// Prints `listening on https://ADDR` (a TLS server's line, as the example servers print it
/// with TLS) and flushes stdout.
pub fn announce_tls(addr: SocketAddr) {
    println!("listening on https://{addr}");
    let _ = std::io::stdout().flush();
}
