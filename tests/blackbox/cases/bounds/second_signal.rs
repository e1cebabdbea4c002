//! A second signal exits 1 at once, even during the destroy hooks, and even right after the
//! first.

use std::time::{Duration, Instant};

use super::poll_exit;
use crate::support::*;

const DESTROY_FLAGS: &[&str] = &["--destroy-hook-duration", "10s"];

/// "At once".
const SECOND_SIGNAL_EXIT_WITHIN: Duration = Duration::from_millis(50);

/// Whether a log line says the destroy hooks started (the driver's wording is free: any line
/// naming destroy hooks or the demo hook).
fn destroy_hooks_started(server: &ServerProcess) -> bool {
    server.stderr_text().lines().any(|l| {
        let l = l.to_ascii_lowercase();
        (l.contains("destroy hook") || l.contains("demo-destroy"))
            && !l.contains("failed")
            && !l.contains("out of time")
            && !l.contains("panicked")
    })
}

/// `--destroy-hook-duration 10s`: after SIGTERM the drain ends at once and the 10 s destroy
/// hook runs; a second SIGTERM then exits 1 within 50 ms.
pub fn second_signal_during_destroy_hook_exits_at_once(bin: &'static str) {
    let mut server = ServerProcess::start(bin, DESTROY_FLAGS);
    let first = server.signal("TERM");
    server.wait_signal(SHUTDOWN_INITIATED, Duration::from_secs(5));

    // Wait for the destroy hook: a log line saying so, or else (nothing logs it) the drain
    // and the listener's stop, then 200 ms for the exit decision.
    let deadline = first.after + Duration::from_secs(5);
    let mut both_seen = None::<Instant>;
    let how = loop {
        if destroy_hooks_started(&server) {
            std::thread::sleep(Duration::from_millis(100));
            break "a log line says the destroy hooks started (+100 ms)";
        }
        let log = server.signals();
        if both_seen.is_none() && log.has(IN_FLIGHT_DRAINED) && log.has(STOPPED_LISTENING) {
            both_seen = Some(Instant::now());
        }
        if both_seen.is_some_and(|at| at.elapsed() >= Duration::from_millis(200)) {
            break "InFlightRequestsDrained and HTTPServerStoppedListening logged (+200 ms)";
        }
        if let Some(status) = server.wait_exit(Duration::ZERO) {
            panic!(
                "exited ({status}) before the second signal: the 10 s destroy hook should \
                 hold the exit\n{}",
                server.describe()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the destroy hook did not start within 5 s of SIGTERM\n{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        server.wait_exit(Duration::ZERO).is_none(),
        "exited before the second signal ({how})\n{}",
        server.describe()
    );

    let second = server.signal("TERM");
    let exit = poll_exit(
        &mut server,
        second.after + Duration::from_secs(8),
        Duration::from_millis(1),
    );
    let timeline = format!(
        "second SIGTERM {:?} after the first ({how}); exit {:?} {:?} after `kill` returned",
        second.before.saturating_duration_since(first.before),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(second.after)),
    );
    eprintln!("{bin} second signal during the destroy hook: {timeline}");
    let (code, at) = exit.unwrap_or_else(|| {
        panic!(
            "still running 8 s after the second signal: {timeline}\n{}",
            server.describe()
        )
    });
    assert_eq!(code, 1, "{timeline}\n{}", server.describe());
    let took = at.saturating_duration_since(second.after);
    assert!(
        took <= SECOND_SIGNAL_EXIT_WITHIN,
        "exit 1 should follow the second signal at once (within \
         {SECOND_SIGNAL_EXIT_WITHIN:?}): {timeline}\n{}",
        server.describe()
    );
    server.assert_trace_legal(DESTROY_FLAGS);
}

/// Two SIGTERMs back to back, no sleep in between: exit 1 at once, whatever phase the second
/// one lands in (the 10 s destroy hook must not hold it). The server must count deliveries
/// (tokio's signal stream alone merges deliveries that come before it is polled).
///
/// The second `kill` is sent as soon as the kernel has delivered the first to the server
/// (usually microseconds after `kill` returns): two SIGTERMs pending at once are one for the
/// kernel, and no server could see two (under load that happened in about one run in five).
pub fn two_signals_back_to_back_exit_1(bin: &'static str) {
    const SIGTERM: u32 = 15;
    let mut server = ServerProcess::start(bin, DESTROY_FLAGS);
    let first = server.signal("TERM");
    assert!(
        server.wait_signal_dequeued(SIGTERM, Duration::from_secs(2)),
        "the first SIGTERM still pending 2 s after `kill` returned\n{}",
        server.describe()
    );
    let second = server.signal("TERM");
    let exit = poll_exit(
        &mut server,
        second.after + Duration::from_secs(8),
        Duration::from_millis(1),
    );
    let timeline = format!(
        "second `kill` started {:?} after the first returned; exit {:?} {:?} after the \
         second `kill` returned",
        second.before.saturating_duration_since(first.after),
        exit.map(|(code, _)| code),
        exit.map(|(_, at)| at.saturating_duration_since(second.after)),
    );
    eprintln!("{bin} two signals back to back: {timeline}");
    let (code, at) = exit.unwrap_or_else(|| {
        panic!(
            "still running 8 s after two signals: {timeline}\n{}",
            server.describe()
        )
    });
    assert_eq!(code, 1, "{timeline}\n{}", server.describe());
    assert!(
        at.saturating_duration_since(second.after) < Duration::from_secs(1),
        "exit 1 should follow the second signal at once: {timeline}\n{}",
        server.describe()
    );
    server.assert_trace_legal(DESTROY_FLAGS);
}
