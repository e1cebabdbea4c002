//! Signals: a second signal exits 1 at once; SIGINT starts the same graceful termination.

use std::time::Duration;

use crate::support::*;

pub fn second_signal_exits_1(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "10s"]);
    assert_health(server.addr, "/readyz", 200, "ok", "before the signal");
    let first = server.signal("TERM");
    assert_readyz_turns_red(&server, first);
    server.wait_signal(SHUTDOWN_INITIATED, Duration::from_secs(5));
    assert!(
        server.wait_exit(Duration::from_millis(300)).is_none(),
        "the first signal should start a 10 s termination, not end the process\n{}",
        server.describe()
    );
    let second = server.signal("TERM");
    server.assert_exit(1, Duration::from_secs(3));
    server.assert_trace_legal(&["--shutdown-delay", "10s"]);
    let took = second.after.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "exit 1 should follow the second signal at once (took {took:?})"
    );
}

pub fn sigint_like_sigterm(bin: &'static str) {
    let mut server = ServerProcess::start(bin, &["--shutdown-delay", "1s"]);
    let addr = server.addr;
    assert_health(addr, "/readyz", 200, "ok", "before the signal");
    let sent = server.signal("INT");
    assert_readyz_turns_red(&server, sent);
    assert_health(addr, "/livez", 200, "ok", "after SIGINT");
    assert_reply(
        &get(addr, "/"),
        200,
        "ok",
        "GET / in the delay after SIGINT",
    );
    server.assert_exit(0, Duration::from_secs(10));
    server.signals().assert_common_dag_order();
    server.assert_trace_legal(&["--shutdown-delay", "1s"]);
}

/// The `listening on` line means the server is serving, so a signal sent the moment it is
/// printed must already start a graceful termination (exit 0), not kill the process.
/// The race is narrow: try it several times (each round takes a few milliseconds).
pub fn signal_right_after_listening_line(bin: &'static str) {
    const ROUNDS: usize = 60;
    for round in 0..ROUNDS {
        let sig = if round % 3 == 2 { "INT" } else { "TERM" };
        let mut server = ServerProcess::spawn(bin, &["--listen", "127.0.0.1:0"], &[]);
        let armed = server.arm_signal(sig);
        if let Err(problem) = server.wait_listening(STARTUP_TIMEOUT) {
            panic!("round {round}: {bin} did not start: {problem}");
        }
        armed.fire();
        let status = server
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| {
                panic!(
                    "round {round}: still running 10 s after SIG{sig}\n{}",
                    server.describe()
                )
            });
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: SIG{sig} sent right after the `listening on` line ended the \
             process with {status} instead of a graceful exit 0 (is the signal handler \
             installed only after the line is printed?)\n{}",
            server.describe()
        );
        server
            .signals()
            .assert_all(&[SHUTDOWN_INITIATED, NOT_ACCEPTING]);
        server.assert_trace_legal(&[]);
    }
}
