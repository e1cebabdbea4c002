//! The time axis: how far it runs, its tick step and labels, the grid lines and the axis
//! itself under the lanes.

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::duration::GoDuration;
use lameduck::plan::{EventKind, Plan, TimelineEvent};

use super::canvas::{Canvas, X0, X1};
use super::times::Times;

/// A short label for a tick: `0s`, `500ms`, `10s`, `1m`, `1m30s`, `2h`.
pub(super) fn tick_label(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() == 0 && secs >= 60 {
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        let mut out = String::new();
        if h > 0 {
            let _ = write!(out, "{h}h");
        }
        if m > 0 {
            let _ = write!(out, "{m}m");
        }
        if s > 0 {
            let _ = write!(out, "{s}s");
        }
        out
    } else {
        GoDuration(d).to_string()
    }
}

/// A tick step giving at most ten ticks up to `max`.
fn tick_step(max: Duration) -> Duration {
    const STEPS_MS: [u64; 24] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
        120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000,
    ];
    let max_ms = max.as_millis().max(1);
    for ms in STEPS_MS {
        if max_ms.div_ceil(u128::from(ms)) <= 10 {
            return Duration::from_millis(ms);
        }
    }
    // Whole hours beyond six-hour steps.
    let hours = max.as_secs().div_ceil(3600).div_ceil(10).max(1);
    Duration::from_secs(hours.saturating_mul(3600))
}

/// The time range drawn and its ticks.
pub(super) struct Axis {
    step: Duration,
    ticks: u128,
    /// Where the axis ends, in seconds (a whole number of ticks).
    pub(super) end_secs: f64,
    /// Where the axis ends.
    pub(super) end: Duration,
    /// Whether SIGKILL comes so far after everything else that it is drawn as an arrow
    /// instead of on the axis.
    pub(super) kill_far: bool,
}

impl Axis {
    /// Everything but a far-away SIGKILL, with a little room after the last event.
    pub(super) fn new(plan: &Plan, times: &Times) -> Self {
        let Times {
            t,
            e3,
            total,
            budget,
            suggested,
            ..
        } = *times;
        let mut latest = plan
            .timeline
            .iter()
            .filter(|e| e.kind != EventKind::Kill)
            .map(TimelineEvent::end)
            .max()
            .unwrap_or_default()
            .max(t);
        if total.is_none() {
            // Leave room to show the unbounded drain running off the axis.
            latest = latest.max(e3.saturating_add(e3.max(Duration::from_secs(5)) / 2));
        }
        let kill_far = budget.is_some_and(|b| b > latest.saturating_mul(2) && b > latest);
        if let Some(b) = budget.filter(|_| !kill_far) {
            latest = latest.max(b);
        }
        if let (None, Some(s)) = (budget, suggested) {
            latest = latest.max(s);
        }
        // A little room after the last event, so the exit is not drawn on the edge.
        latest = latest.saturating_add(latest / 25);
        let step = tick_step(latest);
        let ticks = (latest.as_nanos().div_ceil(step.as_nanos().max(1))).max(1);
        let end_secs = step.as_secs_f64() * ticks as f64;
        Axis {
            step,
            ticks,
            end_secs,
            end: Duration::from_secs_f64(end_secs),
            kill_far,
        }
    }

    /// The ticks, from 0 to the end of the axis.
    fn ticks(&self) -> impl Iterator<Item = Duration> + '_ {
        (0..=self.ticks).map(|i| {
            Duration::from_nanos(u64::try_from(self.step.as_nanos() * i).unwrap_or(u64::MAX))
        })
    }

    /// Grid lines at the ticks, from `top` down to the axis at `axis_y`.
    pub(super) fn draw_grid(&self, c: &mut Canvas, top: f64, axis_y: f64) {
        for d in self.ticks() {
            let x = c.x(d);
            c.line(x, top, x, axis_y, "#eceff1", "stroke-width=\"1\"");
        }
    }

    /// The axis at `axis_y`, its ticks and labels, and its caption.
    pub(super) fn draw(&self, c: &mut Canvas, axis_y: f64) {
        c.line(X0, axis_y, X1, axis_y, "#263238", "stroke-width=\"1.2\"");
        for d in self.ticks() {
            let x = c.x(d);
            c.line(
                x,
                axis_y,
                x,
                axis_y + 6.0,
                "#263238",
                "stroke-width=\"1.2\"",
            );
            c.text(
                x,
                axis_y + 19.0,
                11.0,
                "middle",
                "fill=\"#263238\"",
                &tick_label(d),
            );
        }
        c.text(
            14.0,
            axis_y + 19.0,
            11.0,
            "start",
            "fill=\"#607d8b\"",
            "time after the stop signal",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks() {
        assert_eq!(tick_step(Duration::from_secs(91)), Duration::from_secs(10));
        assert_eq!(tick_step(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(tick_step(Duration::from_secs(101)), Duration::from_secs(15));
        assert_eq!(
            tick_step(Duration::from_millis(900)),
            Duration::from_millis(100)
        );
        assert_eq!(tick_step(Duration::ZERO), Duration::from_millis(1));
        assert_eq!(
            tick_step(Duration::from_secs(3600 * 1000)),
            Duration::from_secs(3600 * 100)
        );
        assert_eq!(tick_label(Duration::from_secs(90)), "1m30s");
        assert_eq!(tick_label(Duration::from_secs(120)), "2m");
        assert_eq!(tick_label(Duration::from_secs(3600)), "1h");
        assert_eq!(tick_label(Duration::from_millis(500)), "500ms");
    }
}
