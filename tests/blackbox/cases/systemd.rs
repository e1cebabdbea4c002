//! systemd notification: `READY=1` once serving, `STOPPING=1` at `ShutdownInitiated`.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::*;

/// Removes the socket file however the test ends.
pub(super) struct SocketPath(pub(super) PathBuf);

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) fn receive_until(
    socket: &UnixDatagram,
    needle: &str,
    within: Duration,
    got: &mut Vec<String>,
) {
    let deadline = Instant::now() + within;
    let mut buf = vec![0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no {needle:?} within {within:?}; received {got:?}"
        );
        socket
            .set_read_timeout(Some(left))
            .expect("set_read_timeout");
        match socket.recv(&mut buf) {
            Ok(n) => {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                let found = message.lines().any(|l| l.trim() == needle);
                got.push(message);
                if found {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("no {needle:?} within {within:?} ({e}); received {got:?}"),
        }
    }
}

/// A bound `NOTIFY_SOCKET` in the temporary directory: the socket, its path (removed when
/// dropped) and the value for the variable.
pub(super) fn notify_socket() -> (UnixDatagram, SocketPath, String) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = SocketPath(std::env::temp_dir().join(format!(
        "lameduck-notify-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )));
    let _ = std::fs::remove_file(&path.0);
    let socket = UnixDatagram::bind(&path.0).expect("bind the notify socket");
    let notify = path.0.to_str().expect("UTF-8 temp path").to_string();
    (socket, path, notify)
}

pub fn systemd_ready_and_stopping(bin: &'static str) {
    let (socket, _path, notify) = notify_socket();

    let mut server = ServerProcess::start_with_env(
        bin,
        &["--shutdown-delay", "500ms"],
        &[("NOTIFY_SOCKET", &notify)],
    );
    let mut got = Vec::new();
    receive_until(&socket, "READY=1", Duration::from_secs(10), &mut got);
    assert!(
        !got.iter().any(|m| m.contains("STOPPING=1")),
        "STOPPING=1 before the signal: {got:?}"
    );
    assert_reply(
        &get(server.addr, "/"),
        200,
        "ok",
        "GET / once READY=1 was sent",
    );

    server.signal("TERM");
    receive_until(&socket, "STOPPING=1", Duration::from_secs(5), &mut got);
    server.assert_exit(0, Duration::from_secs(10));
    server.assert_trace_legal(&["--shutdown-delay", "500ms"]);
}
