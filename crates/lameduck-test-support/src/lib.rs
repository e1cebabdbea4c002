//! Test helpers that more than one package's tests need, written once:
//!
//! * [`http1`]: reading one HTTP/1 response off a raw connection;
//! * [`h2`]: HTTP/2 frames written and read by hand, for tests whose client must stay silent
//!   where a real one would answer;
//! * [`conn`]: waiting for the server to close a connection;
//! * [`spread`]: counting events per 100 ms, to tell a spread from a burst;
//! * [`alloc`]: a counting global allocator and the client and server harness of the
//!   allocation tests;
//! * [`rng`]: a small reproducible generator;
//! * [`plaintext`]: a plaintext HTTP request sent to a TLS port (blocking).
//!
//! Only a dev-dependency. The asynchronous helpers run on tokio and time themselves with
//! tokio's clock (virtual under a paused clock).

#![deny(missing_docs)]

pub mod alloc;
pub mod conn;
pub mod h2;
pub mod http1;
pub mod plaintext;
pub mod rng;
pub mod spread;
