//! The vertical markers (E1/E2, E3, the load balancer's decision, the exit, SIGKILL), their
//! labels stacked in rows so that no label overlaps another and no marker line crosses a
//! label.

use std::time::Duration;

use lameduck::duration::GoDuration;

use super::axis::Axis;
use super::canvas::{text_width, Canvas, GREEN, RED, WIDTH};
use super::times::Times;

/// The most label rows above the lanes.
const MAX_ROWS: usize = 5;

/// A marker and where its label goes.
pub(super) struct Marker {
    label: String,
    color: &'static str,
    dashed: bool,
    /// The label row, 0 at the top.
    pub(super) row: usize,
    /// The label's left and right edges.
    left: f64,
    right: f64,
    /// Where the marker line is.
    x: f64,
}

/// The markers of the plan in time order, each label in the row with the fewest conflicts.
pub(super) fn place(c: &Canvas, times: &Times, axis: &Axis) -> Vec<Marker> {
    let Times {
        t,
        delay,
        e3,
        total,
        budget,
        ..
    } = *times;
    let mut markers: Vec<(Duration, String, &'static str, bool)> = vec![(
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
    if let Some(b) = budget.filter(|_| !axis.kill_far) {
        markers.push((b, format!("SIGKILL {}", GoDuration(b)), RED, true));
    }
    markers.sort_by_key(|m| m.0);
    let mut placed: Vec<Marker> = Vec::new();
    for (at, label, color, dashed) in markers {
        let x = c.x(at);
        let w = text_width(&label, 11.0);
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
                .map(|m| {
                    let (r, l, rt, px) = (m.row, m.left, m.right, m.x);
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
        placed.push(Marker {
            label,
            color,
            dashed,
            row,
            left,
            right,
            x,
        });
    }
    placed
}

/// Draws the markers' lines from their label rows (the first at `markers_top`) down to the
/// axis at `axis_y`, then the labels over them.
pub(super) fn draw(c: &mut Canvas, markers: &[Marker], markers_top: f64, axis_y: f64) {
    let label_y = |m: &Marker| markers_top + 12.0 + 14.0 * m.row as f64;
    for m in markers {
        let dash = if m.dashed {
            "stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        c.line(
            m.x,
            label_y(m) - 10.0,
            m.x,
            axis_y,
            m.color,
            &format!("stroke-width=\"1.6\" {dash}"),
        );
    }
    for m in markers {
        c.text(
            m.left,
            label_y(m),
            11.0,
            "start",
            &format!(
                "fill=\"{}\" font-weight=\"bold\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"",
                m.color
            ),
            &m.label,
        );
    }
}
