//! Misbehaving clients cannot hold the process hostage. Beside a well-behaved in-flight
//! request, three clients misbehave through the termination:
//!
//! - a *stuck reader* pipelines requests with large (6 KB) replies and never reads, until
//!   the server is blocked writing a reply into full socket buffers (mid-response);
//! - a *slowloris* sends a request head one byte every 200 ms and never finishes it;
//! - an *idle* keep-alive connection is used once and then left open.
//!
//! The process must exit no later than the configured timeouts allow: from the signal, the
//! shutdown delay, then (`docs/design.md#dag`) in close-listener mode the drain and the HTTP
//! shutdown timeout (= `--request-timeout`) run side by side; in retry-after mode the drain
//! (≤ `--request-timeout`) and then the 2 s HTTP shutdown timeout. The well-behaved request
//! still completes with 200.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::inflight::log_line_containing;
use crate::support::*;

const DELAY: Duration = Duration::from_secs(1);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
const MODE_B_HTTP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// Process start-up of the exit, scheduling, CPU contention.
const SLACK: Duration = Duration::from_secs(3);

pub fn misbehaving_clients_close_listener_mode(bin: &'static str) {
    misbehaving_clients(
        bin,
        &["--shutdown-delay", "1s", "--request-timeout", "3s"],
        DELAY + REQUEST_TIMEOUT,
    );
}

pub fn misbehaving_clients_retry_after_mode(bin: &'static str) {
    misbehaving_clients(
        bin,
        &[
            "--shutdown-delay",
            "1s",
            "--request-timeout",
            "3s",
            "--shutdown-send-retry-after",
        ],
        DELAY + REQUEST_TIMEOUT + MODE_B_HTTP_SHUTDOWN_TIMEOUT,
    );
}

/// Pipelines `/sleep?duration=<6 KB of x>` (each answered by a 400 echoing the 6 KB) without
/// reading, until a write blocks for 500 ms: the server has stopped reading because it is
/// blocked writing replies nobody reads. Returns the connection and how many were sent.
fn stuck_reader(addr: std::net::SocketAddr) -> (TcpStream, usize) {
    let request = format!(
        "GET /sleep?duration={} HTTP/1.1\r\nHost: {addr}\r\n\r\n",
        "x".repeat(6000)
    );
    let mut stream = TcpStream::connect(addr).expect("connect the stuck reader");
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .expect("write timeout");
    for sent in 0..4000 {
        match stream.write_all(request.as_bytes()) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return (stream, sent);
            }
            Err(e) => panic!("stuck reader: write #{sent}: {e}"),
        }
    }
    panic!("stuck reader: 4000 pipelined requests (24 MB) never blocked: the server did not stall");
}

/// Sends a request head one byte every 200 ms until the server closes the connection, `stop`
/// is set, or 60 s pass. Returns how long it kept going and what the server sent back.
fn slowloris(
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Duration, Instant, String)> {
    let mut stream = TcpStream::connect(addr).expect("connect the slowloris");
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("write timeout");
    stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .expect("read timeout");
    std::thread::Builder::new()
        .name("slowloris".into())
        .spawn(move || {
            let start = Instant::now();
            let head = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ");
            let bytes = head.bytes().chain(std::iter::repeat(b'a'));
            let mut received = Vec::new();
            for byte in bytes {
                if stop.load(Ordering::SeqCst) || start.elapsed() > Duration::from_secs(60) {
                    break;
                }
                if stream.write_all(&[byte]).is_err() {
                    break;
                }
                let mut buf = [0u8; 1024];
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => received.extend_from_slice(&buf[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let first_line = String::from_utf8_lossy(&received)
                .lines()
                .next()
                .unwrap_or("nothing")
                .to_string();
            (start.elapsed(), Instant::now(), first_line)
        })
        .expect("spawn the slowloris")
}

fn misbehaving_clients(bin: &'static str, flags: &[&str], timeouts: Duration) {
    let mut server = ServerProcess::start(bin, flags);
    let addr = server.addr;

    let (stuck, pipelined) = stuck_reader(addr);
    let stop = Arc::new(AtomicBool::new(false));
    let loris = slowloris(addr, Arc::clone(&stop));
    let mut idle = Conn::connect(addr).expect("connect the idle keep-alive client");
    let resp = idle.get("/").expect("GET / on the idle client");
    assert_reply(&resp, 200, "ok", "GET / before going idle");
    let mut well_behaved = Conn::connect(addr).expect("connect the well-behaved client");
    well_behaved
        .send_get("/sleep?duration=2s", &[])
        .expect("send /sleep");
    std::thread::sleep(Duration::from_millis(300));

    let sent = server.signal("TERM");
    let resp = well_behaved.read_response().unwrap_or_else(|e| {
        panic!(
            "the well-behaved in-flight /sleep beside the misbehaving clients: {e}\n{}",
            server.describe()
        )
    });
    let replied = sent.before.elapsed();
    assert_reply(&resp, 200, SLEEP_BODY, "well-behaved in-flight /sleep");

    let bound = timeouts + SLACK;
    let code = server.expect_exit(bound + Duration::from_secs(5));
    let exited = sent.before.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (loris_ran, loris_end, loris_got) = loris.join().expect("slowloris thread");
    let loris_closed = loris_end.saturating_duration_since(sent.before);
    let idle_state = idle.idle_state(Duration::from_secs(1));
    drop(stuck);

    let log = server.signals();
    let at = |name: &str| {
        log.time_of(name)
            .map(|t| format!("{:?}", t.saturating_duration_since(sent.before)))
            .unwrap_or_else(|| "-".into())
    };
    let summary = format!(
        "stuck reader blocked after {pipelined} pipelined requests; well-behaved /sleep 200 at \
         {replied:?}; NotAcceptingNewRequest {}, InFlightRequestsDrained {}, \
         HTTPServerStoppedListening {}; exit {code} at {exited:?} after SIGTERM (bound \
         {timeouts:?} + {SLACK:?} slack); slowloris ran {loris_ran:?}, ended {loris_closed:?} \
         after SIGTERM, got {loris_got:?}; idle keep-alive after exit: {idle_state:?}; {}",
        at(NOT_ACCEPTING),
        at(IN_FLIGHT_DRAINED),
        at(STOPPED_LISTENING),
        log_line_containing(&server.stderr_text(), "stopping listeners"),
    );
    eprintln!("{bin} {flags:?}: {summary}");
    assert!(
        exited <= bound,
        "the misbehaving clients held the process past the configured timeouts: {summary}\n{}",
        server.describe()
    );
    assert_eq!(code, 0, "exit code: {summary}\n{}", server.describe());
    assert_eq!(
        idle_state,
        IdleState::Closed,
        "the idle keep-alive connection is still open after the exit: {summary}"
    );
    server.assert_trace_legal(flags);
}
