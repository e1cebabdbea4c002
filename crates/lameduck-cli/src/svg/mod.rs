//! `--svg FILE`: the worst-case timeline as a picture. One lane per actor (readiness, the
//! load balancer's probes, the server, hooks, drains, Kubernetes) over a shared time axis,
//! with vertical markers at E1/E2, E3, the load balancer's decision and the exit, and the gap
//! where requests are lost shaded red.
//!
//! [`render`] lays the picture out top to bottom: the title, the marker labels
//! (`markers`), the lanes (`lanes`), the time axis (`axis`) and the notes. Every
//! element is drawn on a `canvas::Canvas`.

mod axis;
mod canvas;
mod lanes;
mod markers;
mod times;

use std::fmt::Write as _;

use lameduck::config::ShutdownMode;
use lameduck::duration::GoDuration;
use lameduck::plan::{Plan, PlanInput};

use axis::Axis;
use canvas::{esc, Canvas, FONT, GREEN, LANE_H, NORMAL_DRAIN, RED, WIDTH};
use times::Times;

/// The SVG document.
pub fn render(input: &PlanInput, plan: &Plan) -> String {
    let times = Times::of(plan);
    let Times { t, delay, .. } = times;
    let axis = Axis::new(plan, &times);
    let mut c = Canvas::new(axis.end_secs);
    let lanes = lanes::lanes(input, plan, &times, &axis);
    let markers = markers::place(&c, &times, &axis);
    let rows = markers.iter().map(|m| m.row + 1).max().unwrap_or(1);

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
    axis.draw_grid(&mut c, lanes_top, axis_y);
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
    markers::draw(&mut c, &markers, markers_top, axis_y);
    axis.draw(&mut c, axis_y);

    // Notes under the axis.
    let notes = notes(input, plan, &times);
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
    document(input, plan, &times, title_y, height, &c.body)
}

/// The lines under the axis, each with its colour: the detection formula, the verdict on
/// the shutdown delay, and the plan's other problems.
fn notes(input: &PlanInput, plan: &Plan, times: &Times) -> Vec<(String, &'static str)> {
    let probes = input.probes;
    let Times { t, delay, .. } = *times;
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
    notes
}

/// The whole document: the title and subtitle over the drawn `body`.
fn document(
    input: &PlanInput,
    plan: &Plan,
    times: &Times,
    title_y: f64,
    height: f64,
    body: &str,
) -> String {
    let probes = input.probes;
    let Times { delay, total, .. } = *times;
    // Title.
    let (verdict, color) = if plan.is_safe() {
        ("SAFE", GREEN)
    } else {
        ("UNSAFE", RED)
    };
    let mode_name = match plan.mode {
        ShutdownMode::CloseListener => "close-listener mode",
        ShutdownMode::SendRetryAfter => "retry-after mode",
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
    svg.push_str(body);
    svg.push_str("</svg>\n");
    svg
}
