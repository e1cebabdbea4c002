//! The plan's times that the picture shows, shared by every part of the drawing.

use std::time::Duration;

use lameduck::plan::Plan;

/// The plan's times that the picture shows, after the stop signal.
#[derive(Clone, Copy)]
pub(super) struct Times {
    /// Worst-case detection by the load balancer.
    pub(super) t: Duration,
    /// The shutdown delay.
    pub(super) delay: Duration,
    /// `NotAcceptingNewRequest`, at worst.
    pub(super) e3: Duration,
    /// The exit, at worst; `None` when unbounded.
    pub(super) total: Option<Duration>,
    /// `terminationGracePeriodSeconds`, when given.
    pub(super) budget: Option<Duration>,
    /// The suggested `terminationGracePeriodSeconds`.
    pub(super) suggested: Option<Duration>,
}

impl Times {
    pub(super) fn of(plan: &Plan) -> Self {
        Times {
            t: plan.detection_worst_case,
            delay: plan.shutdown_delay,
            e3: plan.stop_accepting_worst_case,
            total: plan.total_worst_case,
            budget: plan.termination_grace_period,
            suggested: plan.suggested_termination_grace_period,
        }
    }
}
