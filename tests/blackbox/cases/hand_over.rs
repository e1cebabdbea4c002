//! The hand-over of the listening socket to a successor process (SIGUSR2): the successor
//! serves on the same address, the old process terminates through the whole DAG and exits 0,
//! and its log, read by the core's log reader, is a legal trace with the hand-over before
//! `ShutdownInitiated`. Without a successor, the process keeps serving.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lameduck::trace::TraceEvent;

use crate::support::*;

/// A Unix socket path in the temporary directory, removed however the test ends.
struct HandOverPath(PathBuf);

impl HandOverPath {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "lameduck-handover-{}-{}.sock",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        HandOverPath(path)
    }

    fn as_str(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }

    /// Waits until a successor waits there.
    fn wait_exists(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.0.exists() {
            assert!(Instant::now() < deadline, "no successor at {:?}", self.0);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for HandOverPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Polls the log for a line containing `needle`.
fn wait_log(server: &ServerProcess, needle: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !server.stderr_text().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log within {within:?}\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn hand_over_to_a_successor(bin: &'static str) {
    let path = HandOverPath::new();
    let flags = [
        "--shutdown-delay",
        "300ms",
        "--handover-socket",
        path.as_str(),
    ];
    let mut old = ServerProcess::start(bin, &flags);
    let addr = old.addr;
    let mut keep_alive = Conn::connect(addr).expect("connect to the old process");
    assert_eq!(keep_alive.get("/").expect("GET /").status(), 200);

    let mut successor_args = vec!["--listen", "handover"];
    successor_args.extend_from_slice(&flags);
    // The successor runs "under systemd": it must announce itself as the main process.
    let (notify, _notify_path, notify_env) = super::systemd::notify_socket();
    let mut successor =
        ServerProcess::spawn(bin, &successor_args, &[("NOTIFY_SOCKET", &notify_env)]);
    path.wait_exists(STARTUP_TIMEOUT);
    old.signal("USR2");
    let new_addr = successor
        .wait_listening(Duration::from_secs(15))
        .unwrap_or_else(|e| panic!("{bin}: the successor did not serve: {e}"));
    assert_eq!(
        new_addr, addr,
        "{bin}: the successor serves the same socket"
    );
    let mut got = Vec::new();
    let main_pid = format!("MAINPID={}", successor.pid());
    super::systemd::receive_until(&notify, &main_pid, Duration::from_secs(10), &mut got);

    // The old process drains through the same DAG as on SIGTERM and exits 0.
    old.assert_exit(0, Duration::from_secs(15));
    let summary = old.assert_trace_legal(&flags);
    assert_eq!(summary.exit_code, Some(0));
    let trace = old.trace();
    assert!(
        trace.iter().any(|e| e.event == TraceEvent::HandedOver),
        "{bin}: no hand-over in the old process's trace\n{}",
        old.describe()
    );
    assert!(
        old.stderr_text().contains("cause=hand_over"),
        "{bin}: the summary does not name the hand-over\n{}",
        old.describe()
    );

    // The address keeps serving, from the successor, on new connections.
    for _ in 0..5 {
        assert_reply(&get(addr, "/"), 200, "ok", "GET / after the hand-over");
    }
    assert_health(addr, "/readyz", 200, "ok", "the successor is ready");
    successor.signal("TERM");
    successor.assert_exit(0, Duration::from_secs(15));
    successor.assert_trace_legal(&successor_args);
}

pub fn hand_over_without_successor_keeps_serving(bin: &'static str) {
    let path = HandOverPath::new();
    let flags = [
        "--shutdown-delay",
        "200ms",
        "--handover-socket",
        path.as_str(),
        "--handover-timeout",
        "300ms",
    ];
    let mut server = ServerProcess::start(bin, &flags);
    server.signal("USR2");
    wait_log(&server, "hand-over failed", Duration::from_secs(10));
    assert_reply(
        &get(server.addr, "/"),
        200,
        "ok",
        "GET / after a failed hand-over",
    );
    assert_health(server.addr, "/readyz", 200, "ok", "still ready");
    server.signal("TERM");
    server.assert_exit(0, Duration::from_secs(15));
    let summary = server.assert_trace_legal(&flags);
    assert_eq!(summary.exit_code, Some(0));
    assert!(server.stderr_text().contains("cause=signal"));
}
