//! The drawing surface: the picture's geometry and palette, and the SVG primitives (rects,
//! text, lines and labelled bars) placed on the time axis.

use std::fmt::Write as _;
use std::time::Duration;

pub(super) const WIDTH: f64 = 1000.0;
/// Where time 0 is drawn; P0 (just before 0) sits left of it.
pub(super) const X0: f64 = 230.0;
pub(super) const X1: f64 = WIDTH - 40.0;
pub(super) const LANE_H: f64 = 30.0;
pub(super) const BAR_H: f64 = 18.0;
pub(super) const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

pub(super) const GREEN: &str = "#43a047";
pub(super) const RED: &str = "#d32f2f";
pub(super) const READY_RED: &str = "#ef9a9a";
pub(super) const PROBE_FAIL: &str = "#e57373";
pub(super) const PROPAGATION: &str = "#bdbdbd";
pub(super) const OUT_OF_SERVICE: &str = "#cfd8dc";
pub(super) const LAME_DUCK: &str = "#ffcc80";
pub(super) const RETRY_AFTER: &str = "#ce93d8";
pub(super) const CLOSED: &str = "#e0e0e0";
pub(super) const HOOKS: &str = "#90caf9";
pub(super) const NORMAL_DRAIN: &str = "#64b5f6";
pub(super) const LONG_DRAIN: &str = "#4db6ac";
pub(super) const HTTP_SHUTDOWN: &str = "#b0bec5";
pub(super) const BUDGET: &str = "#eeeeee";

/// Escapes text for SVG.
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Rough text width at `size` px, for placing labels.
pub(super) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// The SVG elements drawn so far, over a time axis from 0 to `axis_end` seconds.
pub(super) struct Canvas {
    pub(super) body: String,
    axis_end: f64,
}

impl Canvas {
    /// An empty canvas whose axis ends at `axis_end` seconds.
    pub(super) fn new(axis_end: f64) -> Self {
        Canvas {
            body: String::new(),
            axis_end,
        }
    }

    pub(super) fn x(&self, d: Duration) -> f64 {
        let frac = (d.as_secs_f64() / self.axis_end).clamp(0.0, 1.2);
        X0 + frac * (X1 - X0)
    }

    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{fill}\" {extra}/>",
            w.max(1.0)
        );
    }

    pub(super) fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, extra: &str, s: &str) {
        let _ = writeln!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {FONT} {extra}>{}</text>",
            esc(s)
        );
    }

    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, extra: &str) {
        let _ = writeln!(
            self.body,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" {extra}/>"
        );
    }

    /// A bar in lane `y` (the lane's top) from `from` to `to`, with `label` inside when it
    /// fits, else beside it (right, or left near the right edge).
    pub(super) fn bar(&mut self, y: f64, from: Duration, to: Duration, fill: &str, label: &str) {
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
    pub(super) fn bar_inside(
        &mut self,
        y: f64,
        from: Duration,
        to: Duration,
        fill: &str,
        labels: &[&str],
    ) {
        let (a, b) = (self.x(from), self.x(to));
        self.bar(y, from, to, fill, "");
        if let Some(label) = labels.iter().find(|l| text_width(l, 11.0) + 8.0 <= b - a) {
            self.bar_label(a, b, y + (LANE_H - BAR_H) / 2.0, label);
        }
    }

    pub(super) fn bar_label(&mut self, a: f64, b: f64, top: f64, label: &str) {
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
