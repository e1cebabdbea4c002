//! `--json`: the plan as one JSON object, written by hand (durations as exact decimal seconds).

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::config::ShutdownMode;
use lameduck::plan::{EventKind, Plan, PlanInput};

/// Exact decimal seconds: `30`, `1.5`, `0.000000001`.
pub fn seconds(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return d.as_secs().to_string();
    }
    let frac = format!("{nanos:09}");
    format!("{}.{}", d.as_secs(), frac.trim_end_matches('0'))
}

fn opt_seconds(d: Option<Duration>) -> String {
    d.map_or_else(|| String::from("null"), seconds)
}

/// A JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The whole document; `kubernetes` is the `--kubernetes` snippet when asked for.
pub fn render(input: &PlanInput, plan: &Plan, verdict: &str, kubernetes: Option<&str>) -> String {
    let probes = &input.probes;
    let config = &input.config;
    let mut s = String::from("{\n");
    let mut field = |name: &str, value: String| {
        let _ = writeln!(s, "  {}: {value},", string(name));
    };
    field("safe", plan.is_safe().to_string());
    field("verdict", string(verdict));
    field(
        "mode",
        string(match plan.mode {
            ShutdownMode::CloseListener => "A",
            ShutdownMode::SendRetryAfter => "B",
        }),
    );
    field(
        "detection_worst_case_seconds",
        seconds(plan.detection_worst_case),
    );
    field("shutdown_delay_seconds", seconds(plan.shutdown_delay));
    field(
        "min_safe_shutdown_delay_seconds",
        seconds(plan.min_safe_shutdown_delay),
    );
    field(
        "stop_accepting_worst_case_seconds",
        seconds(plan.stop_accepting_worst_case),
    );
    field(
        "normal_drain_worst_case_seconds",
        opt_seconds(plan.normal_drain_worst_case),
    );
    field(
        "total_worst_case_seconds",
        opt_seconds(plan.total_worst_case),
    );
    field(
        "termination_grace_period_seconds",
        opt_seconds(plan.termination_grace_period),
    );
    field(
        "suggested_termination_grace_period_seconds",
        opt_seconds(plan.suggested_termination_grace_period),
    );
    let inputs = [
        ("probe_interval_seconds", seconds(probes.interval)),
        ("probe_timeout_seconds", seconds(probes.timeout)),
        (
            "unhealthy_threshold",
            probes.unhealthy_threshold.to_string(),
        ),
        (
            "propagation_delay_seconds",
            seconds(probes.propagation_delay),
        ),
        (
            "overlapping_probes",
            probes.allow_overlapping_probes.to_string(),
        ),
        ("shutdown_delay_seconds", seconds(config.shutdown_delay())),
        ("request_timeout_seconds", seconds(config.request_timeout())),
        (
            "shutdown_watch_termination_grace_period_seconds",
            seconds(config.shutdown_watch_termination_grace_period()),
        ),
        (
            "shutdown_send_retry_after",
            config.shutdown_send_retry_after().to_string(),
        ),
        (
            "pre_shutdown_hooks_seconds",
            seconds(input.pre_shutdown_hooks),
        ),
        (
            "termination_grace_period_seconds",
            opt_seconds(input.termination_grace_period),
        ),
    ];
    let inputs: Vec<String> = inputs
        .iter()
        .map(|(k, v)| format!("    {}: {v}", string(k)))
        .collect();
    field("input", format!("{{\n{}\n  }}", inputs.join(",\n")));
    let problems: Vec<String> = plan
        .problems
        .iter()
        .map(|p| {
            format!(
                "    {{\"kind\": {}, \"message\": {}}}",
                string(p.name()),
                string(&p.to_string())
            )
        })
        .collect();
    field("problems", list(&problems));
    let events: Vec<String> = plan
        .timeline
        .iter()
        .map(|e| {
            let probe = match e.kind {
                EventKind::ProbeFails { index } => format!(", \"probe\": {index}"),
                EventKind::ProbesFail { first, last } => {
                    format!(", \"probes\": [{first}, {last}]")
                }
                _ => String::new(),
            };
            format!(
                "    {{\"at_seconds\": {}, \"duration_seconds\": {}, \"end_seconds\": {}, \
                 \"tag\": {}, \"kind\": {}{probe}, \"label\": {}}}",
                seconds(e.at),
                seconds(e.duration),
                seconds(e.end()),
                string(&e.tag),
                string(e.kind.name()),
                string(&e.label)
            )
        })
        .collect();
    field("timeline", list(&events));
    if let Some(yaml) = kubernetes {
        field("kubernetes", string(yaml));
    }
    // Drop the last comma.
    if s.ends_with(",\n") {
        s.truncate(s.len() - 2);
        s.push('\n');
    }
    s.push_str("}\n");
    s
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        String::from("[]")
    } else {
        format!("[\n{}\n  ]", items.join(",\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_seconds() {
        assert_eq!(seconds(Duration::from_secs(30)), "30");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_nanos(1)), "0.000000001");
        assert_eq!(seconds(Duration::ZERO), "0");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\n\u{1}×"), "\"a\\\"b\\\\c\\n\\u0001×\"");
    }
}
