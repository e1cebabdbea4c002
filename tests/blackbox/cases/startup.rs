//! Startup: `--help`, invalid flags and a busy port.

use std::net::TcpListener;
use std::time::Duration;

use crate::support::*;

const FLAGS: [&str; 10] = [
    "--listen",
    "--shutdown-delay",
    "--shutdown-send-retry-after",
    "--shutdown-watch-termination-grace-period",
    "--request-timeout",
    "--livez-grace-period",
    "--pre-shutdown-hook-duration",
    "--destroy-hook-duration",
    "--idle-close-spread",
    "--help",
];

pub fn help_lists_flags(bin: &'static str) {
    let mut server = ServerProcess::spawn(bin, &["--help"], &[]);
    server.assert_exit(0, Duration::from_secs(10));
    let text = format!("{}\n{}", server.stdout_text(), server.stderr_text());
    let missing: Vec<&str> = FLAGS
        .iter()
        .copied()
        .filter(|f| !text.contains(f))
        .collect();
    assert!(
        missing.is_empty(),
        "--help does not mention {missing:?}:\n{text}"
    );
}

pub fn invalid_flags_exit_2(bin: &'static str) {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["--shutdown-delay", "-1s"],
            &["shutdown-delay", "shutdown_delay"],
        ),
        (
            &["--request-timeout", "abc"],
            &["request-timeout", "request_timeout"],
        ),
        (
            &["--shutdown-watch-termination-grace-period", "5"],
            &[
                "shutdown-watch-termination-grace-period",
                "shutdown_watch_termination_grace_period",
            ],
        ),
        (&["--bogus-flag"], &["bogus-flag"]),
        (
            &["--goaway-chance", "0.5"],
            &["goaway-chance", "goaway_chance"],
        ),
        // Not shorter than retry-after mode's 2 s HTTP shutdown timeout.
        (
            &["--idle-close-spread", "2s", "--shutdown-send-retry-after"],
            &["idle-close-spread", "idle_close_spread"],
        ),
    ];
    for (flags, names) in cases {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        let mut server = ServerProcess::spawn(bin, &args, &[]);
        let code = server.expect_exit(Duration::from_secs(10));
        assert_eq!(code, 2, "{args:?} should exit 2\n{}", server.describe());
        let stderr = server.stderr_text();
        assert!(
            names.iter().any(|n| stderr.contains(n)),
            "{args:?}: stderr should name the flag ({names:?})\n{}",
            server.describe()
        );
        assert!(
            !server.stdout_text().contains("listening on"),
            "{args:?}: started serving\n{}",
            server.describe()
        );
    }
}

pub fn busy_port_exits_1(bin: &'static str) {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port to occupy");
    let addr = taken.local_addr().expect("local_addr").to_string();
    let mut server = ServerProcess::spawn(bin, &["--listen", &addr], &[]);
    let code = server.expect_exit(Duration::from_secs(10));
    assert_eq!(
        code,
        1,
        "binding a busy port should exit 1\n{}",
        server.describe()
    );
    let stderr = server.stderr_text();
    let lower = stderr.to_ascii_lowercase();
    assert!(
        stderr.contains(&addr) || lower.contains("bind") || lower.contains("in use"),
        "stderr should name the address or the bind failure\n{}",
        server.describe()
    );
    drop(taken);
}
