//! The words of `lameduck plan --observed`: the verdict, the figures and the recommendation,
//! with the reason for it.

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::duration::GoDuration;
use lameduck::plan::observed::{
    CombinedRecommendation, ObservedRecommendation, ObservedVerdict, LATE_FACTOR, LATE_STEP,
    PROBE_SLACK,
};
use lameduck::plan::Plan;

use crate::logs::Logs;

/// The load balancer's flags, named where the logs alone can not tell.
const PROBE_FLAGS: &str = "--probe-interval, --probe-timeout, --unhealthy-threshold";

/// `n thing` or `n things`.
pub(crate) fn count(n: u64, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

pub(crate) fn d(duration: Duration) -> GoDuration {
    GoDuration(duration)
}

/// The one-line verdict on the observations.
pub fn verdict(logs: &Logs, r: &ObservedRecommendation) -> String {
    let o = &logs.total;
    match r.verdict {
        ObservedVerdict::LateConnections => format!(
            "LATE: {} of {} had late connections ({} in all): the load balancer was still \
             opening connections at the end of the shutdown delay",
            o.with_late_connections,
            count(o.terminations, "termination"),
            o.late_connections
        ),
        ObservedVerdict::ConfiguredTooShort => format!(
            "TOO SHORT: no termination had late connections, but under the configured shutdown \
             delay {} the latest observed new connection ({}) would be late",
            r.shutdown_delay
                .map_or_else(String::new, |c| d(c).to_string()),
            o.last_new_connection
                .map_or_else(String::new, |l| d(l).to_string()),
        ),
        ObservedVerdict::Holds => {
            let delay = r
                .shutdown_delay
                .map_or_else(|| String::from("delay"), |c| format!("delay {}", d(c)));
            let margin = if r.configured {
                // The configured delay against the latest connection of all.
                r.shutdown_delay
                    .zip(o.last_new_connection)
                    .map(|(c, l)| c.saturating_sub(l))
            } else {
                o.min_margin
            };
            match margin {
                Some(m) => format!(
                    "HOLDS: no termination had late connections: the shutdown {delay} holds, \
                     with {} margin",
                    d(m)
                ),
                None if o.without_arrivals == o.terminations => String::from(
                    "HOLDS as far as is known: the servers did not record arrivals, so no late \
                     connection was seen",
                ),
                None => format!(
                    "HOLDS: no termination had late connections; no new connection came after \
                     the signal, so the logs do not show how long the load balancer takes (the \
                     shutdown {delay} was not put to the test)"
                ),
            }
        }
    }
}

/// The figures, one per line.
pub(crate) fn figures(logs: &Logs, r: &ObservedRecommendation) -> String {
    let o = &logs.total;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "terminations   {} in {}",
        o.terminations,
        count(logs.files.len() as u64, "file")
    );
    for f in &logs.files {
        let old = match f.observed.without_arrivals {
            0 => String::new(),
            n if n == f.observed.terminations => String::from(", without arrival fields"),
            n => format!(", {n} of them without arrival fields"),
        };
        let _ = writeln!(s, "  - {}: {}{old}", f.file, f.observed.terminations);
    }
    let delay = match (o.shutdown_delay_min, o.shutdown_delay_max) {
        (Some(min), Some(max)) if min == max => format!("{} observed", d(min)),
        (Some(min), Some(max)) => format!("{} to {} observed", d(min), d(max)),
        _ => String::from("none observed"),
    };
    let _ = writeln!(
        s,
        "shutdown delay {delay} (from the signal to NotAcceptingNewRequest)"
    );
    let recorded = o.without_arrivals < o.terminations;
    let last = match o.last_new_connection {
        Some(l) => format!("{} after the signal (the latest of all terminations)", d(l)),
        None if recorded => String::from("none after the signal"),
        None => String::from("not recorded"),
    };
    let _ = writeln!(s, "last new conn  {last}");
    let margin = match o.min_margin {
        Some(m) => format!(
            "{} left in the shutdown delay (delay - latest new connection, the smallest over \
             the terminations)",
            d(m)
        ),
        None => String::from("-"),
    };
    let _ = writeln!(s, "margin         {margin}");
    let late = if o.has_late_connections() {
        format!(
            "{} in {} of {}",
            o.late_connections,
            o.with_late_connections,
            count(o.terminations, "termination")
        )
    } else if recorded {
        String::from("none")
    } else {
        String::from("not recorded")
    };
    let _ = writeln!(
        s,
        "late conns     {late} (new connections in the last {}% of the shutdown delay, or after \
         it)",
        r.late_arrival_percent
    );
    let _ = writeln!(
        s,
        "late requests  {} (reported only: requests late in the shutdown delay or turned away \
         after it; on connections opened before the signal they are the clients' keep-alive, \
         not the load balancer's decision)",
        o.late_requests
    );
    let _ = writeln!(
        s,
        "before ready   {} before /readyz first answered ready",
        count(o.requests_before_ready, "request")
    );
    if let Some(period) = o.late_probe_interval {
        let _ = writeln!(
            s,
            "probes         /readyz asked every {} before the signal; up to {} after it in a \
             late termination, and the balancer still sent",
            d(period),
            count(o.late_failed_probes, "failed probe")
        );
    }
    s
}

/// Why the observed recommendation is what it is, when connections were late.
fn late_reason(logs: &Logs, r: &ObservedRecommendation, recommended: Duration) -> String {
    let o = &logs.total;
    let late_delay = o
        .late_shutdown_delay
        .map_or_else(String::new, |x| d(x).to_string());
    if let (Some(probe_minimum), Some(threshold), Some(period)) =
        (r.probe_minimum, r.failure_threshold, o.late_probe_interval)
    {
        if recommended == probe_minimum {
            return format!(
                "the balancer probed /readyz every {} and still sent after {}: a threshold of \
                 {threshold} failed probes takes {threshold} × {} + {}, kept out of the last \
                 {}% of the delay, rounded up to {} (assumes the prober is the balancer that \
                 routes)",
                d(period),
                count(o.late_failed_probes, "failed probe"),
                d(period),
                d(PROBE_SLACK),
                r.late_arrival_percent,
                d(LATE_STEP)
            );
        }
    }
    if Some(recommended) == r.late_minimum {
        format!(
            "{LATE_FACTOR} × the observed delay {late_delay}, rounded up to {}",
            d(LATE_STEP)
        )
    } else if Some(recommended) == r.min_delay_for_observed {
        format!(
            "the smallest under which the latest observed new connection ({}) is not late, more \
             than {LATE_FACTOR} × the observed delay {late_delay}",
            o.last_new_connection
                .map_or_else(String::new, |l| d(l).to_string())
        )
    } else {
        format!(
            "the configured delay, already more than {LATE_FACTOR} × the delay {late_delay} of \
             the late terminations (are these logs from an older configuration?)"
        )
    }
}

/// The recommendation without the model.
pub(crate) fn recommendation_alone(logs: &Logs, r: &ObservedRecommendation) -> String {
    let o = &logs.total;
    let mut s = String::new();
    let Some(recommended) = r.recommended else {
        let _ = writeln!(
            s,
            "recommended    nothing: no termination stopped accepting, so no shutdown delay was \
             observed"
        );
        return s;
    };
    match r.verdict {
        ObservedVerdict::Holds => {
            let _ = writeln!(
                s,
                "recommended    --shutdown-delay {}: keep it",
                d(recommended)
            );
            if let (Some(reduction), Some(last)) = (r.reduction, o.last_new_connection) {
                let _ = writeln!(
                    s,
                    "reduction      optional: --shutdown-delay {}, the smallest under which the \
                     latest observed new connection ({}) would not be late; the terminations \
                     seen need not have met the load balancer's worst case, so check it with \
                     the load balancer's flags ({PROBE_FLAGS}) or --deployment before reducing",
                    d(reduction),
                    d(last)
                );
            }
        }
        ObservedVerdict::ConfiguredTooShort => {
            let _ = writeln!(
                s,
                "recommended    --shutdown-delay {}: the smallest under which the latest \
                 observed new connection ({}) is not late",
                d(recommended),
                o.last_new_connection
                    .map_or_else(String::new, |l| d(l).to_string())
            );
        }
        ObservedVerdict::LateConnections => {
            let _ = writeln!(
                s,
                "recommended    --shutdown-delay {} at least: {}",
                d(recommended),
                late_reason(logs, r, recommended)
            );
            if r.probe_minimum.is_some() {
                let _ = writeln!(
                    s,
                    "estimate       the detection time comes from the /readyz probes the servers \
                     saw and an assumed failure threshold; give the load balancer's flags \
                     ({PROBE_FLAGS}) or --deployment to compute its worst case"
                );
            } else {
                let _ = writeln!(
                    s,
                    "lower bound    the load balancer still opened connections late in the \
                     shutdown delay, so the logs only show that its detection takes longer: the \
                     true detection time is unknown from the logs; give the load balancer's \
                     flags ({PROBE_FLAGS}) or --deployment to compute its worst case"
                );
            }
        }
    }
    s
}

/// The recommendation with the model: the larger of both.
pub(crate) fn recommendation_with_model(
    logs: &Logs,
    r: &ObservedRecommendation,
    c: &CombinedRecommendation,
    plan: &Plan,
) -> String {
    let o = &logs.total;
    let mut s = String::new();
    let observed = match (r.verdict, r.recommended, r.min_delay_for_observed) {
        (ObservedVerdict::LateConnections, Some(x), _) => {
            format!("{} at least, {}", d(x), late_reason(logs, r, x))
        }
        (_, _, Some(need)) => format!(
            "{} needed: the smallest delay under which the latest observed new connection ({}) \
             is not late",
            d(need),
            o.last_new_connection
                .map_or_else(String::new, |l| d(l).to_string())
        ),
        (_, _, None) => String::from("nothing: no new connection after the signal was recorded"),
    };
    let _ = writeln!(s, "from the logs  {observed}");
    let _ = writeln!(
        s,
        "model          {} worst-case detection (the minimum safe shutdown delay)",
        d(c.model)
    );
    if c.recommended <= plan.shutdown_delay {
        let _ = writeln!(
            s,
            "recommended    --shutdown-delay {}: keep it; it covers both",
            d(plan.shutdown_delay)
        );
    } else {
        let _ = writeln!(
            s,
            "recommended    --shutdown-delay {}: the larger of the two (now {})",
            d(c.recommended),
            d(plan.shutdown_delay)
        );
    }
    if r.verdict == ObservedVerdict::LateConnections {
        let _ = writeln!(
            s,
            "lower bound    the load balancer still opened connections late in the shutdown \
             delay, so the logs only show that its detection takes longer: the true detection \
             time is unknown from the logs; the model's worst case is {}",
            d(c.model)
        );
    }
    if let (Some(reduction), Some(need)) = (c.reduction, r.min_delay_for_observed) {
        let _ = writeln!(
            s,
            "reduction      optional: --shutdown-delay {}, the larger of the smallest delay under \
             which the latest observed new connection ({}) would not be late ({}) and the \
             model's worst-case detection ({})",
            d(reduction),
            o.last_new_connection
                .map_or_else(String::new, |l| d(l).to_string()),
            d(need),
            d(c.model)
        );
    }
    let _ = writeln!(s, "overall        {}", overall(r, c, plan));
    s
}

/// The verdict of both, the model's plan and the logs.
fn overall(r: &ObservedRecommendation, c: &CombinedRecommendation, plan: &Plan) -> String {
    if c.safe {
        return String::from("SAFE: the model's plan is safe and the termination logs hold");
    }
    let mut reasons = Vec::new();
    if !plan.is_safe() {
        reasons.push("the model's plan is unsafe");
    }
    match r.verdict {
        ObservedVerdict::LateConnections => {
            reasons.push("the termination logs show late connections");
        }
        ObservedVerdict::ConfiguredTooShort => {
            reasons.push("the configured delay is shorter than the termination logs need");
        }
        ObservedVerdict::Holds => {}
    }
    format!("UNSAFE: {}", reasons.join(", and "))
}
