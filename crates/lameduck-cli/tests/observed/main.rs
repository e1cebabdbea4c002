//! `lameduck plan --observed FILE...`: termination summaries read from server logs of every
//! runtime, the figures, the recommendation alone and next to the model's, `--json`,
//! `--deployment`, and the errors for logs that can not be used. One module per part; this
//! file holds what they share.

use std::process::Output;
use std::time::Duration;

#[path = "../common/mod.rs"]
mod common;
use common::{lameduck, AWS_PROBES};

use lameduck_cli::report::Seconds;

mod inputs;
mod json;
mod verdicts;
mod with_the_model;

/// `tests/fixtures/observed/NAME`.
fn fixture(name: &str) -> String {
    common::fixture(&format!("observed/{name}"))
        .display()
        .to_string()
}

/// Writes `bytes` to a file of this test process.
fn temp(name: &str, bytes: &[u8]) -> String {
    common::temp_file(name, bytes).display().to_string()
}

/// `lameduck plan --observed FILES... EXTRA...`.
fn observed(files: &[&str], extra: &[&str]) -> Output {
    let mut args = vec!["plan", "--observed"];
    args.extend_from_slice(files);
    args.extend_from_slice(extra);
    lameduck(&args)
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn secs(s: f64) -> Seconds {
    Seconds(Duration::from_secs_f64(s))
}

/// A summary line as the hyper adapter logs it.
fn summary(lame_duck: &str, arrivals: &str) -> String {
    format!(
        "2026-11-27T05:07:33.916Z INFO lameduck_hyper::server: [graceful-termination] \
         termination summary: cause=signal signal_to_exit=3.503s lame_duck={lame_duck} \
         normal_drain=1.002s long_running_drain=- requests_drained=3 requests_remaining=0 \
         streams_ended=0 streams_remaining=0 rejected=0 rejected_not_accepting=0 \
         rejected_retry_after=0 rejected_request_timeout=0 rejected_routes_not_ready=0 \
         {arrivals} code=0\n"
    )
}

const SMALL_PROBES: [&str; 6] = [
    "--probe-interval",
    "1s",
    "--probe-timeout",
    "500ms",
    "--unhealthy-threshold",
    "1",
];
