//! The lanes, one per actor, top to bottom: `/readyz`, the load balancer's probes, new
//! requests at the server, the pre-shutdown hooks, the two drains, the HTTP shutdown and
//! Kubernetes' termination budget.

use std::time::Duration;

use lameduck::config::ShutdownMode;
use lameduck::plan::{EventKind, Plan, PlanInput, TimelineEvent};

use super::axis::{tick_label, Axis};
use super::canvas::{
    text_width, Canvas, BAR_H, BUDGET, CLOSED, GREEN, HOOKS, HTTP_SHUTDOWN, LAME_DUCK, LANE_H,
    LONG_DRAIN, NORMAL_DRAIN, OUT_OF_SERVICE, PROBE_FAIL, PROPAGATION, READY_RED, RED, RETRY_AFTER,
    X0, X1,
};
use super::times::Times;

/// Draws a lane's content, given the lane's top.
type Draw = Box<dyn Fn(&mut Canvas, f64)>;

/// One lane: its title and what to draw in it.
pub(super) struct Lane {
    pub(super) title: &'static str,
    pub(super) draw: Draw,
}

/// The lanes of the plan, in drawing order; lanes with nothing to show are left out.
pub(super) fn lanes(input: &PlanInput, plan: &Plan, times: &Times, axis: &Axis) -> Vec<Lane> {
    let probes = input.probes;
    let mode = plan.mode;
    let find = |kind: fn(&EventKind) -> bool| -> Option<TimelineEvent> {
        plan.timeline.iter().find(|e| kind(&e.kind)).cloned()
    };
    let Times {
        t,
        delay,
        e3,
        total,
        budget,
        suggested,
    } = *times;
    let end_of_axis = axis.end;
    let kill_far = axis.kill_far;

    let mut lanes: Vec<Lane> = Vec::new();
    let readyz_end = total.unwrap_or(end_of_axis);
    lanes.push(Lane {
        title: "/readyz",
        draw: Box::new(move |c, y| {
            let top = y + (LANE_H - BAR_H) / 2.0;
            c.rect(X0 - 26.0, top, 26.0, BAR_H, "#a5d6a7", "");
            c.text(X0 - 13.0, top + 13.0, 10.0, "middle", "", "200");
            c.bar(
                y,
                Duration::ZERO,
                readyz_end,
                READY_RED,
                "500 from E2 (the stop signal) on",
            );
        }),
    });
    {
        let events: Vec<TimelineEvent> = plan.timeline.clone();
        let prop = probes.propagation_delay;
        lanes.push(Lane {
            title: "load balancer probes",
            draw: Box::new(move |c, y| {
                let top = y + (LANE_H - BAR_H) / 2.0;
                // P0: just before E2, drawn left of the zero line.
                c.rect(X0 - 20.0, top, 16.0, BAR_H, GREEN, "rx=\"3\"");
                c.text(
                    X0 - 12.0,
                    top + 13.0,
                    10.0,
                    "middle",
                    "fill=\"white\" font-weight=\"bold\"",
                    "P0",
                );
                for e in &events {
                    if let EventKind::ProbesFail { .. } = e.kind {
                        let (a, b) = (c.x(e.at), c.x(e.end()));
                        c.rect(a, top + 3.0, b - a, BAR_H - 6.0, PROBE_FAIL, "fill-opacity=\"0.45\" stroke=\"#b71c1c\" stroke-width=\"0.8\" stroke-dasharray=\"3 2\"");
                        if b - a >= text_width(&e.tag, 9.0) + 2.0 {
                            c.text((a + b) / 2.0, top + 13.0, 9.0, "middle", "fill=\"#b71c1c\" font-weight=\"bold\"", &e.tag);
                        }
                    }
                    if let EventKind::ProbeFails { .. } = e.kind {
                        let (a, b) = (c.x(e.at), c.x(e.end()));
                        c.rect(
                            a,
                            top,
                            b - a,
                            BAR_H,
                            PROBE_FAIL,
                            "rx=\"3\" stroke=\"#b71c1c\" stroke-width=\"0.8\"",
                        );
                        let size = if b - a >= 22.0 { 10.0 } else { 8.0 };
                        if b - a >= text_width(&e.tag, size) + 2.0 {
                            c.text(
                                (a + b) / 2.0,
                                top + 13.0,
                                size,
                                "middle",
                                "fill=\"white\" font-weight=\"bold\"",
                                &e.tag,
                            );
                        } else {
                            c.text(
                                (a + b) / 2.0,
                                top - 2.0,
                                8.0,
                                "middle",
                                "fill=\"#b71c1c\"",
                                &e.tag,
                            );
                        }
                    }
                }
                if !prop.is_zero() {
                    let a = c.x(t.saturating_sub(prop));
                    let b = c.x(t);
                    c.rect(a, top + 4.0, b - a, BAR_H - 8.0, PROPAGATION, "");
                }
                let tail_label = "out of service";
                let (a, b) = (c.x(t), X1);
                if b > a {
                    c.rect(a, top, b - a, BAR_H, OUT_OF_SERVICE, "");
                    if b - a > text_width(tail_label, 11.0) + 8.0 {
                        c.text(
                            (a + b) / 2.0,
                            top + 13.0,
                            11.0,
                            "middle",
                            "fill=\"#455a64\"",
                            tail_label,
                        );
                    }
                }
            }),
        });
    }
    let drained = find(|k| *k == EventKind::Drained).map(|e| e.at);
    lanes.push(Lane {
        title: "server: new requests",
        draw: Box::new(move |c, y| {
            // Labelled inside only, with the longest label that fits: the next bar follows.
            c.bar_inside(
                y,
                Duration::ZERO,
                delay,
                LAME_DUCK,
                &["served (lame-duck window)", "served", ""],
            );
            if e3 > delay {
                c.bar_inside(y, delay, e3, "#ffe0b2", &["waiting for hooks", "hooks", ""]);
            }
            match mode {
                ShutdownMode::CloseListener => {
                    c.bar(y, e3, end_of_axis, CLOSED, "refused: listener closed");
                }
                ShutdownMode::SendRetryAfter => {
                    let until = drained.unwrap_or(end_of_axis);
                    c.bar(y, e3, until, RETRY_AFTER, "429 Retry-After");
                    if until < end_of_axis {
                        c.bar(y, until, end_of_axis, CLOSED, "refused");
                    }
                }
            }
        }),
    });
    if !input.pre_shutdown_hooks.is_zero() {
        let hooks = input.pre_shutdown_hooks;
        lanes.push(Lane {
            title: "pre-shutdown hooks",
            draw: Box::new(move |c, y| {
                c.bar(y, Duration::ZERO, hooks, HOOKS, "hooks run (at most)");
            }),
        });
    }
    let normal = plan.normal_drain_worst_case;
    lanes.push(Lane {
        title: "normal requests drain",
        draw: Box::new(move |c, y| match normal {
            Some(n) => c.bar(
                y,
                e3,
                e3.saturating_add(n),
                NORMAL_DRAIN,
                "<= request timeout",
            ),
            None => {
                let a = c.x(e3);
                let top = y + (LANE_H - BAR_H) / 2.0;
                c.rect(a, top, X1 - a, BAR_H, "url(#fade)", "");
                c.bar_label(a, X1, top, "no bound (--request-timeout 0)");
            }
        }),
    });
    let grace = input.config.shutdown_watch_termination_grace_period();
    if !grace.is_zero() {
        lanes.push(Lane {
            title: "long-running drain",
            draw: Box::new(move |c, y| {
                c.bar(
                    y,
                    e3,
                    e3.saturating_add(grace),
                    LONG_DRAIN,
                    "watch/SSE ended, paced",
                );
            }),
        });
    }
    if let Some(hs) = find(|k| *k == EventKind::HttpShutdown) {
        lanes.push(Lane {
            title: "HTTP shutdown",
            draw: Box::new(move |c, y| {
                c.bar(y, hs.at, hs.end(), HTTP_SHUTDOWN, "listener closed, <= 2s");
            }),
        });
    }
    lanes.push(Lane {
        title: "Kubernetes",
        draw: Box::new(move |c, y| {
            let top = y + (LANE_H - BAR_H) / 2.0;
            match budget {
                Some(b) => {
                    let label = format!("terminationGracePeriodSeconds {}", tick_label(b));
                    if kill_far {
                        c.rect(
                            X0,
                            top,
                            X1 - X0,
                            BAR_H,
                            BUDGET,
                            "stroke=\"#9e9e9e\" stroke-width=\"0.6\"",
                        );
                        c.text(
                            X1 - 6.0,
                            top + 13.0,
                            11.0,
                            "end",
                            "fill=\"#424242\"",
                            &format!("{label} (SIGKILL) →"),
                        );
                    } else {
                        c.bar(y, Duration::ZERO, b, BUDGET, &label);
                    }
                }
                None => {
                    let label = match suggested {
                        Some(s) => {
                            format!("suggested terminationGracePeriodSeconds: {}", s.as_secs())
                        }
                        None => String::from("terminationGracePeriodSeconds: no bound is enough"),
                    };
                    let end = suggested.unwrap_or(end_of_axis);
                    let (a, b) = (c.x(Duration::ZERO), c.x(end));
                    c.rect(
                        a,
                        top,
                        b - a,
                        BAR_H,
                        "none",
                        "stroke=\"#9e9e9e\" stroke-dasharray=\"4 3\"",
                    );
                    c.bar_label(a, b, top, &label);
                }
            }
            if let (Some(total), Some(b)) = (total, budget) {
                if total > b && !kill_far {
                    let (a, e) = (c.x(b), c.x(total));
                    c.rect(a, top, e - a, BAR_H, RED, "fill-opacity=\"0.35\"");
                }
            }
        }),
    });

    lanes
}
