//! `--svg FILE`: the worst-case timeline as a picture. One lane per actor (readiness, the
//! load balancer's probes, the server, hooks, drains, Kubernetes) over a shared time axis,
//! with vertical markers at E1/E2, E3, the load balancer's decision and the exit, and the gap
//! where requests are lost shaded red.

use std::fmt::Write as _;
use std::time::Duration;

use lameduck::config::ShutdownMode;
use lameduck::duration::GoDuration;
use lameduck::plan::{EventKind, Plan, PlanInput, TimelineEvent};

const WIDTH: f64 = 1000.0;
/// Where time 0 is drawn; P0 (just before 0) sits left of it.
const X0: f64 = 230.0;
const X1: f64 = WIDTH - 40.0;
const LANE_H: f64 = 30.0;
const BAR_H: f64 = 18.0;
const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

const GREEN: &str = "#43a047";
const RED: &str = "#d32f2f";
const READY_RED: &str = "#ef9a9a";
const PROBE_FAIL: &str = "#e57373";
const PROPAGATION: &str = "#bdbdbd";
const OUT_OF_SERVICE: &str = "#cfd8dc";
const LAME_DUCK: &str = "#ffcc80";
const RETRY_AFTER: &str = "#ce93d8";
const CLOSED: &str = "#e0e0e0";
const HOOKS: &str = "#90caf9";
const NORMAL_DRAIN: &str = "#64b5f6";
const LONG_DRAIN: &str = "#4db6ac";
const HTTP_SHUTDOWN: &str = "#b0bec5";
const BUDGET: &str = "#eeeeee";

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Rough text width at `size` px, for placing labels.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// A short label for a tick: `0s`, `500ms`, `10s`, `1m`, `1m30s`, `2h`.
fn tick_label(d: Duration) -> String {
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

struct Canvas {
    body: String,
    axis_end: f64,
}

impl Canvas {
    fn x(&self, d: Duration) -> f64 {
        let frac = (d.as_secs_f64() / self.axis_end).clamp(0.0, 1.2);
        X0 + frac * (X1 - X0)
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{fill}\" {extra}/>",
            w.max(1.0)
        );
    }

    fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, extra: &str, s: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {FONT} {extra}>{}</text>",
            esc(s)
        );
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" {extra}/>"
        );
    }

    /// A bar in lane `y` (the lane's top) from `from` to `to`, with `label` inside when it
    /// fits, else beside it (right, or left near the right edge).
    fn bar(&mut self, y: f64, from: Duration, to: Duration, fill: &str, label: &str) {
        let (a, b) = (self.x(from), self.x(to));
        let top = y + (LANE_H - BAR_H) / 2.0;
        self.rect(
            a,
            top,
            b - a,
            BAR_H,
            fill,
            "stroke=\"#546e7a\" stroke-width=\"0.6\"",
        );
        self.bar_label(a, b, top, label);
    }

    /// A bar labelled inside with the first of `labels` that fits, or not at all.
    fn bar_inside(&mut self, y: f64, from: Duration, to: Duration, fill: &str, labels: &[&str]) {
        let (a, b) = (self.x(from), self.x(to));
        self.bar(y, from, to, fill, "");
        if let Some(label) = labels.iter().find(|l| text_width(l, 11.0) + 8.0 <= b - a) {
            self.bar_label(a, b, y + (LANE_H - BAR_H) / 2.0, label);
        }
    }

    fn bar_label(&mut self, a: f64, b: f64, top: f64, label: &str) {
        if label.is_empty() {
            return;
        }
        let size = 11.0;
        let w = text_width(label, size);
        let ty = top + BAR_H / 2.0 + 4.0;
        if w + 8.0 <= b - a {
            self.text((a + b) / 2.0, ty, size, "middle", "fill=\"#212121\"", label);
        } else if b + 6.0 + w <= WIDTH - 4.0 {
            self.text(b + 5.0, ty, size, "start", "fill=\"#37474f\"", label);
        } else {
            self.text(a - 5.0, ty, size, "end", "fill=\"#37474f\"", label);
        }
    }
}

/// Draws a lane's content, given the lane's top.
type Draw = Box<dyn Fn(&mut Canvas, f64)>;

/// One lane: its title and what to draw in it.
struct Lane {
    title: &'static str,
    draw: Draw,
}

/// The SVG document.
pub fn render(input: &PlanInput, plan: &Plan) -> String {
    let probes = input.probes;
    let mode = plan.mode;
    let find = |kind: fn(&EventKind) -> bool| -> Option<TimelineEvent> {
        plan.timeline.iter().find(|e| kind(&e.kind)).cloned()
    };
    let t = plan.detection_worst_case;
    let delay = plan.shutdown_delay;
    let e3 = plan.stop_accepting_worst_case;
    let total = plan.total_worst_case;
    let budget = plan.termination_grace_period;
    let suggested = plan.suggested_termination_grace_period;

    // The time range: everything but a far-away SIGKILL (drawn as an arrow instead).
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
    let axis_end = step.as_secs_f64() * ticks as f64;
    let mut c = Canvas {
        body: String::new(),
        axis_end,
    };
    let end_of_axis = Duration::from_secs_f64(axis_end);

    // Lanes.
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
                "<= request timeout + 1s",
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

    // Vertical markers, their labels stacked in rows so that no label overlaps another and no
    // marker line crosses a label.
    let mut markers: Vec<(Duration, String, &str, bool)> = vec![(
        Duration::ZERO,
        String::from("E1 signal, E2 /readyz red"),
        "#263238",
        false,
    )];
    markers.push((
        e3,
        format!("E3 NotAcceptingNewRequest {}", GoDuration(e3)),
        if t > delay { RED } else { "#e65100" },
        false,
    ));
    markers.push((
        t,
        format!("LB out of service t={}", GoDuration(t)),
        if t > delay { RED } else { GREEN },
        true,
    ));
    if let Some(total) = total {
        markers.push((
            total,
            format!("exit {}", GoDuration(total)),
            "#000000",
            false,
        ));
    }
    if let Some(b) = budget.filter(|_| !kill_far) {
        markers.push((b, format!("SIGKILL {}", GoDuration(b)), RED, true));
    }
    markers.sort_by_key(|m| m.0);
    const MAX_ROWS: usize = 5;
    // (row, left, right, x) of the labels placed so far.
    let mut placed: Vec<(usize, f64, f64, f64)> = Vec::new();
    for (at, label, _, _) in &markers {
        let x = c.x(*at);
        let w = text_width(label, 11.0);
        let (left, right) = if x + w + 4.0 > WIDTH - 4.0 {
            (x - w - 3.0, x - 3.0)
        } else {
            (x + 3.0, x + w + 3.0)
        };
        // Conflicts in a row: overlapping another label weighs most, then a marker line
        // crossing a label (labels have a white halo, so a crossing stays readable).
        let conflicts = |row: usize| -> u32 {
            placed
                .iter()
                .map(|&(r, l, rt, px)| {
                    let overlaps = r == row && left < rt + 6.0 && l < right + 6.0;
                    // Our line runs down from our row; theirs from theirs.
                    let our_line_crosses = r > row && l - 2.0 <= x && x <= rt + 2.0;
                    let their_line_crosses = row > r && left - 2.0 <= px && px <= right + 2.0;
                    100 * u32::from(overlaps)
                        + u32::from(our_line_crosses)
                        + u32::from(their_line_crosses)
                })
                .sum()
        };
        let row = (0..MAX_ROWS)
            .min_by_key(|&r| (conflicts(r), r))
            .unwrap_or(0);
        placed.push((row, left, right, x));
    }
    let rows = placed.iter().map(|p| p.0 + 1).max().unwrap_or(1);

    // Layout.
    let title_y = 30.0;
    let markers_top = 74.0;
    let lanes_top = markers_top + rows as f64 * 14.0 + 6.0;
    let lanes_bottom = lanes_top + LANE_H * lanes.len() as f64;
    let axis_y = lanes_bottom + 8.0;

    // Background, lane stripes and titles.
    for (i, lane) in lanes.iter().enumerate() {
        let y = lanes_top + LANE_H * i as f64;
        if i % 2 == 0 {
            c.rect(8.0, y, WIDTH - 16.0, LANE_H, "#f7f9fa", "");
        }
        c.text(
            14.0,
            y + LANE_H / 2.0 + 4.0,
            12.0,
            "start",
            "fill=\"#263238\"",
            lane.title,
        );
    }
    // Grid lines at the ticks.
    for i in 0..=ticks {
        let d = Duration::from_nanos(u64::try_from(step.as_nanos() * i).unwrap_or(u64::MAX));
        let x = c.x(d);
        c.line(x, lanes_top, x, axis_y, "#eceff1", "stroke-width=\"1\"");
    }
    // The danger zone: the load balancer still sends, the server no longer accepts.
    if t > delay {
        let (a, b) = (c.x(delay), c.x(t));
        c.rect(
            a,
            lanes_top,
            b - a,
            axis_y - lanes_top,
            RED,
            "fill-opacity=\"0.13\" stroke=\"#d32f2f\" stroke-dasharray=\"5 3\"",
        );
    }
    for (i, lane) in lanes.iter().enumerate() {
        (lane.draw)(&mut c, lanes_top + LANE_H * i as f64);
    }

    // The markers: lines first, then the labels over them.
    for ((_, _, color, dashed), (row, _, _, x)) in markers.iter().zip(&placed) {
        let ly = markers_top + 12.0 + 14.0 * *row as f64;
        let dash = if *dashed {
            "stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        c.line(
            *x,
            ly - 10.0,
            *x,
            axis_y,
            color,
            &format!("stroke-width=\"1.6\" {dash}"),
        );
    }
    for ((_, label, color, _), (row, left, _, _)) in markers.iter().zip(&placed) {
        let ly = markers_top + 12.0 + 14.0 * *row as f64;
        c.text(
            *left,
            ly,
            11.0,
            "start",
            &format!(
                "fill=\"{color}\" font-weight=\"bold\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\""
            ),
            label,
        );
    }

    // Axis.
    c.line(X0, axis_y, X1, axis_y, "#263238", "stroke-width=\"1.2\"");
    for i in 0..=ticks {
        let d = Duration::from_nanos(u64::try_from(step.as_nanos() * i).unwrap_or(u64::MAX));
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

    // Notes under the axis.
    let mut notes: Vec<(String, &str)> = Vec::new();
    let formula = if probes.propagation_delay.is_zero() {
        format!(
            "worst-case detection t = {} × {} + {} = {}: a probe succeeds just before E2, then {} probes fail, the last at its timeout",
            probes.unhealthy_threshold,
            GoDuration(probes.interval),
            GoDuration(probes.timeout),
            GoDuration(t),
            probes.unhealthy_threshold
        )
    } else {
        format!(
            "worst-case detection t = {} × {} + {} + {} propagation = {}",
            probes.unhealthy_threshold,
            GoDuration(probes.interval),
            GoDuration(probes.timeout),
            GoDuration(probes.propagation_delay),
            GoDuration(t)
        )
    };
    notes.push((formula, "#263238"));
    if t > delay {
        notes.push((
            format!(
                "✗ red band: for up to {} the load balancer still sends requests the server no longer accepts; use --shutdown-delay {} or more",
                GoDuration(t - delay),
                GoDuration(t)
            ),
            RED,
        ));
    } else {
        notes.push((
            format!(
                "✓ E2 + t <= E3: out of service at {} <= shutdown delay {}",
                GoDuration(t),
                GoDuration(delay)
            ),
            GREEN,
        ));
    }
    for p in &plan.problems {
        if let lameduck::plan::Problem::DetectionAfterStopAccepting { .. } = p {
            continue;
        }
        notes.push((format!("✗ {p}"), RED));
    }
    let notes_top = axis_y + 44.0;
    for (i, (note, color)) in notes.iter().enumerate() {
        c.text(
            14.0,
            notes_top + 17.0 * i as f64,
            12.0,
            "start",
            &format!("fill=\"{color}\""),
            note,
        );
    }
    let height = notes_top + 17.0 * notes.len() as f64 + 6.0;

    // Title.
    let (verdict, color) = if plan.is_safe() {
        ("SAFE", GREEN)
    } else {
        ("UNSAFE", RED)
    };
    let mode_name = match mode {
        ShutdownMode::CloseListener => "mode A",
        ShutdownMode::SendRetryAfter => "mode B",
    };
    let total_text = match total {
        Some(total) => format!("worst-case termination {}", GoDuration(total)),
        None => String::from("termination has no bound"),
    };
    let subtitle = format!(
        "{mode_name} · probes every {} (timeout {}, {} failures) · shutdown delay {} · {total_text}",
        GoDuration(probes.interval),
        GoDuration(probes.timeout),
        probes.unhealthy_threshold,
        GoDuration(delay)
    );

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\">"
    );
    let _ = writeln!(
        svg,
        "<title>lameduck plan: {verdict}</title>\n<defs><linearGradient id=\"fade\" x1=\"0\" x2=\"1\"><stop offset=\"0\" stop-color=\"{NORMAL_DRAIN}\"/><stop offset=\"1\" stop-color=\"{NORMAL_DRAIN}\" stop-opacity=\"0\"/></linearGradient></defs>"
    );
    let _ = writeln!(
        svg,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height:.0}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"14\" y=\"{title_y}\" font-size=\"20\" font-weight=\"bold\" {FONT} fill=\"#263238\">lameduck plan: <tspan fill=\"{color}\">{verdict}</tspan></text>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"14\" y=\"{}\" font-size=\"12\" {FONT} fill=\"#455a64\">{}</text>",
        title_y + 22.0,
        esc(&subtitle)
    );
    svg.push_str(&c.body);
    svg.push_str("</svg>\n");
    svg
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
