//! The text report: inputs, the worst-case timeline as a table, the verdict.

use std::fmt::Write as _;

use lameduck::config::ShutdownMode;
use lameduck::duration::GoDuration;
use lameduck::plan::{ceil_seconds, Plan, PlanInput, Problem, DEFAULT_TERMINATION_GRACE_PERIOD};

use crate::inputs::ManifestContext;

/// The mode's name (close-listener or retry-after), with what it means.
pub fn mode_line(mode: ShutdownMode) -> &'static str {
    match mode {
        ShutdownMode::CloseListener => "close-listener mode: the listener closes at NotAcceptingNewRequest",
        ShutdownMode::SendRetryAfter => {
            "retry-after mode: new requests get 429 from NotAcceptingNewRequest; the listener closes after the drain"
        }
    }
}

/// The one-line verdict.
pub fn verdict(plan: &Plan) -> String {
    let t = GoDuration(plan.detection_worst_case);
    let delay = GoDuration(plan.shutdown_delay);
    if plan.is_safe() {
        format!(
            "SAFE: worst-case detection {t} <= shutdown delay {delay}: the load balancer stops \
             sending requests no later than the server stops accepting them"
        )
    } else if plan.detection_worst_case > plan.shutdown_delay {
        format!(
            "UNSAFE: worst-case detection {t} > shutdown delay {delay}; minimum safe shutdown \
             delay {t}"
        )
    } else {
        String::from("UNSAFE: the termination does not fit in terminationGracePeriodSeconds")
    }
}

/// The whole text report.
pub fn render(input: &PlanInput, plan: &Plan) -> String {
    let mut s = String::new();
    let probes = &input.probes;
    let config = &input.config;
    let d = GoDuration;
    let _ = writeln!(s, "lameduck plan ({})", mode_line(plan.mode));
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "load balancer  probes /readyz every {}, timeout {}, out of service after {} failed probe{}{}",
        d(probes.interval),
        d(probes.timeout),
        probes.unhealthy_threshold,
        if probes.unhealthy_threshold == 1 { "" } else { "s" },
        if probes.propagation_delay.is_zero() {
            String::new()
        } else {
            format!(", then {} to propagate", d(probes.propagation_delay))
        }
    );
    let mut formula = format!(
        "{} × {} + {}",
        probes.unhealthy_threshold,
        d(probes.interval),
        d(probes.timeout)
    );
    if !probes.propagation_delay.is_zero() {
        let _ = write!(formula, " + {}", d(probes.propagation_delay));
    }
    let _ = writeln!(
        s,
        "detection      worst case t = {formula} = {} after /readyz turns red",
        d(plan.detection_worst_case)
    );
    let _ = writeln!(
        s,
        "shutdown       delay {}, request timeout {}, watch grace period {}, pre-shutdown hooks {}",
        d(config.shutdown_delay()),
        d(config.request_timeout()),
        d(config.shutdown_watch_termination_grace_period()),
        d(input.pre_shutdown_hooks)
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "worst-case timeline, from the stop signal:");
    let _ = writeln!(s, "  {:>9}  {:>9}  {:<5} event", "at", "until", "tag");
    for e in &plan.timeline {
        let until = if e.duration.is_zero() {
            String::new()
        } else {
            d(e.end()).to_string()
        };
        let _ = writeln!(
            s,
            "  {:>9}  {:>9}  {:<5} {}",
            d(e.at).to_string(),
            until,
            e.tag,
            e.label
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "check          E2 + t <= E3: 0s + {} <= {} (shutdown delay): {}",
        d(plan.detection_worst_case),
        d(plan.shutdown_delay),
        if plan.detection_worst_case <= plan.shutdown_delay {
            "ok"
        } else {
            "FAILS"
        }
    );
    let total = match plan.total_worst_case {
        Some(total) => format!("worst-case termination {}", d(total)),
        None => String::from("worst-case termination has no bound (--request-timeout 0)"),
    };
    let budget = match plan.termination_grace_period {
        Some(b) => format!(
            "terminationGracePeriodSeconds {}: {}",
            d(b),
            match plan.total_worst_case {
                Some(total) if total <= b => "fits",
                _ => "does NOT fit",
            }
        ),
        None => {
            String::from("terminationGracePeriodSeconds not checked (--termination-grace-period)")
        }
    };
    let _ = writeln!(s, "total          {total}; {budget}");
    if let Some(suggested) = plan.suggested_termination_grace_period {
        let _ = writeln!(
            s,
            "suggested      terminationGracePeriodSeconds: {} (worst case rounded up + 5s)",
            suggested.as_secs()
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "verdict        {}", verdict(plan));
    for problem in &plan.problems {
        let _ = writeln!(s, "  - {problem}");
    }
    if plan.detection_worst_case > plan.shutdown_delay {
        let _ = writeln!(
            s,
            "minimum safe shutdown delay: {} (--shutdown-delay {})",
            d(plan.min_safe_shutdown_delay),
            d(plan.min_safe_shutdown_delay)
        );
    }
    let over_budget = plan
        .problems
        .iter()
        .any(|p| matches!(p, Problem::ExceedsTerminationGracePeriod { .. }));
    if over_budget {
        if let Some(suggested) = plan.suggested_termination_grace_period {
            let _ = writeln!(
                s,
                "minimum terminationGracePeriodSeconds: {} (suggested: {})",
                plan.total_worst_case.map_or(0, ceil_seconds),
                suggested.as_secs()
            );
        }
    }
    if plan.termination_grace_period.is_none() {
        match plan.total_worst_case {
            Some(total) if total > DEFAULT_TERMINATION_GRACE_PERIOD => {
                let _ = writeln!(
                    s,
                    "note: Kubernetes' default terminationGracePeriodSeconds ({}) is shorter than \
                     the worst case {}; set it to {} (see --kubernetes)",
                    DEFAULT_TERMINATION_GRACE_PERIOD.as_secs(),
                    d(total),
                    plan.suggested_termination_grace_period
                        .map_or(0, |g| g.as_secs())
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "note: with --request-timeout 0 no terminationGracePeriodSeconds is sure to be \
                     enough"
                );
            }
            Some(_) => {}
        }
    }
    s
}

/// With `--deployment`: what was read from the manifest, before the report.
pub fn manifest_header(context: &ManifestContext) -> String {
    let m = &context.manifest;
    let mut s = format!(
        "manifest       {} (Deployment {:?}, container {:?}): terminationGracePeriodSeconds {}",
        context.file,
        m.deployment,
        m.container,
        ceil_seconds(context.termination_grace_period)
    );
    if let Some(sleep) = m.pre_stop_sleep {
        let _ = write!(s, ", preStop sleep {}", GoDuration(sleep));
    }
    s.push('\n');
    for note in &context.notes {
        let _ = writeln!(s, "  note: {note}");
    }
    s.push('\n');
    s
}

/// With `--deployment`: what to change in the manifest, after the report.
pub fn manifest_changes(changes: &[String]) -> String {
    if changes.is_empty() {
        return String::from("\nmanifest       nothing to change\n");
    }
    let mut s = String::from("\nto change in the manifest:\n");
    for change in changes {
        let _ = writeln!(s, "  - {change}");
    }
    s
}
