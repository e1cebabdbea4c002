//! Load at the moment of termination, on every example server (the contract is in the
//! repository's `docs/design.md#example-servers`):
//!
//! - 1,000 concurrent in-flight `/sleep?duration=2s` requests at SIGTERM complete with 200,
//!   in both modes;
//! - 2,000 open `/watch` streams end cleanly, paced, within a 5 s grace;
//! - misbehaving clients (a stuck reader, a slowloris, an idle keep-alive connection) cannot
//!   hold the exit past the configured timeouts, while a well-behaved request beside them
//!   completes.
//!
//! Each run's log is checked with the core's `check_trace`, as in the black-box suite (whose
//! harness this target shares: `tests/blackbox/support`, cases in `tests/blackbox/load`).
//!
//! The cases are heavy (thousands of sockets; about 3 minutes for all), so they are ignored
//! by a plain `cargo test` and run by `.ci/run`:
//!
//! ```sh
//! ulimit -n 8192   # each case holds up to 2,000 connections on each side
//! cargo test -p lameduck-suite --test load -- --ignored --test-threads 1
//! ```
//!
//! Whatever `--test-threads` says, the cases take a process-wide lock and run one at a time,
//! so that one case's load does not skew another's timing.

#[allow(dead_code, unused_imports)]
#[path = "blackbox/support/mod.rs"]
mod support;

#[path = "blackbox/load/mod.rs"]
mod load;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// One load case at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stamps one ignored `#[test]` per case for one server binary.
macro_rules! load_tests {
    ([$($case:ident),* $(,)?] $server:ident) => {
        mod $server {
            $(
                #[test]
                #[ignore = "heavy load: run with --ignored (see .ci/run)"]
                fn $case() {
                    let _serial = crate::serial();
                    crate::load::$case(stringify!($server));
                }
            )*
        }
    };
}

macro_rules! suite {
    (cases: $cases:tt, servers: [$($server:ident),* $(,)?] $(,)?) => {
        $( load_tests!($cases $server); )*
    };
}

suite! {
    cases: [
        inflight_1000_sleeps_close_listener_mode,
        inflight_1000_sleeps_retry_after_mode,
        watch_2000_streams_drain_paced,
        misbehaving_clients_close_listener_mode,
        misbehaving_clients_retry_after_mode,
    ],
    servers: [tokio_server, axum_server, smol_server, actix_server],
}
