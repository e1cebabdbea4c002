//! The termination bounds, as kube-apiserver's, one module each:
//!
//! - the request timeout bounds a normal request's whole life, streamed body included (a
//!   `/stream` past it is aborted), while long-running requests (`/watch`) outlive it and end,
//!   paced, within the watch grace period;
//! - a normal request shorter than the request timeout completes across the drain, however
//!   long it is;
//! - a second signal exits 1 at once, even while destroy hooks run;
//! - an exempt request (`/metrics`) in flight when the drain starts completes before the exit.

use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::*;

mod exempt_in_flight;
mod long_request;
mod second_signal;
mod stream_abort;
mod watches;

pub use exempt_in_flight::*;
pub use long_request::*;
pub use second_signal::*;
pub use stream_abort::*;
pub use watches::*;

/// Polls the exit status every `every` until `deadline`: the exit code and the moment the
/// exit was seen (the exit happened at most `every` before it, and not after it).
fn poll_exit(
    server: &mut ServerProcess,
    deadline: Instant,
    every: Duration,
) -> Option<(i32, Instant)> {
    loop {
        let before = Instant::now();
        if let Some(status) = server.wait_exit(Duration::ZERO) {
            return Some((status.code().unwrap_or(-1), before));
        }
        if before >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// Sends `GET path` on a new connection to `addr` and reads the reply in a thread of its own
/// named `name`, bounded by `read_timeout`: when the request was sent, and the thread, which
/// returns the reply and when it came.
fn get_in_thread(
    addr: SocketAddr,
    path: &str,
    read_timeout: Duration,
    name: &str,
) -> (Instant, JoinHandle<(io::Result<Response>, Instant)>) {
    let mut conn = Conn::connect(addr).expect("connect");
    conn.set_read_timeout(read_timeout).expect("read timeout");
    let sent = Instant::now();
    conn.send_get(path, &[])
        .unwrap_or_else(|e| panic!("send {path}: {e}"));
    let reader = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let resp = conn.read_response();
            (resp, Instant::now())
        })
        .expect("spawn reader");
    (sent, reader)
}
