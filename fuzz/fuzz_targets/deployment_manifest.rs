//! `lameduck plan --deployment` never panics on any manifest text: the reader (YAML or JSON,
//! several documents), the merge with the flags, the planner and the text, JSON and Kubernetes
//! outputs.
//!
//! Input: one selector byte (which outputs, whether a container is named), then the manifest
//! text (lossily decoded as UTF-8).
#![no_main]

use lameduck_cli::args::PlanArgs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let args = PlanArgs {
        json: Some(selector & 1 != 0),
        kubernetes: Some(selector & 2 != 0),
        container: (selector & 4 != 0).then(|| String::from("app")),
        shutdown_delay: (selector & 8 != 0).then(|| std::time::Duration::from_secs(30)),
        ..PlanArgs::default()
    };
    if let Ok(output) = lameduck_cli::run_plan_on_manifest(&args, &text) {
        assert!(!output.stdout.is_empty());
    }
});
