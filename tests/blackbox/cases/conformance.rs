//! Conformance of a real run with the core's reference model, and a check that the check can
//! fail: a real run's trace, deliberately corrupted, is rejected with the rule it breaks.
//!
//! (Every case that runs a full termination also checks its own trace, through
//! `TraceCheck::assert_trace_legal`.)

use std::time::Duration;

use lameduck::check_trace;

use crate::support::trace::{config_for, corruptions, render};
use crate::support::*;

pub fn corrupted_trace_is_rejected(bin: &'static str) {
    for flags in [
        &["--shutdown-delay", "500ms"][..],
        &["--shutdown-delay", "500ms", "--shutdown-send-retry-after"][..],
    ] {
        let mut server = ServerProcess::start(bin, flags);
        // The first 200 from /readyz fires HasBeenReady.
        assert_health(server.addr, "/readyz", 200, "ok", "before the signal");
        server.signal("TERM");
        server.assert_exit(0, Duration::from_secs(10));
        let summary = server.assert_trace_legal(flags);
        assert_eq!(summary.exit_code, Some(0));

        let config = config_for(flags);
        let events = server.trace();
        let broken = corruptions(&events, &config);
        assert!(broken.len() >= 5, "every corruption applies to a real run");
        for (what, corrupted, rule) in broken {
            match check_trace(&config, &corrupted) {
                Ok(summary) => panic!(
                    "{bin} {flags:?}: check_trace accepted a corrupted trace ({what}): \
                     {summary:?}\n{}",
                    render(&corrupted)
                ),
                Err(v) => assert_eq!(
                    v.rule,
                    rule,
                    "{bin} {flags:?}: {what}: rejected for another reason: {v}\n{}",
                    render(&corrupted)
                ),
            }
        }
    }
}
