//! A hand-written SVG line chart (no plotting dependency): a few series on linear axes, a
//! legend, and optional vertical markers.

use std::fmt::Write;

/// One line of the chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Stroke colour (any SVG colour).
    pub color: String,
    /// Points in data units, in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (targets, references).
    pub dashed: bool,
}

/// A chart.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Smaller text under the title.
    pub subtitle: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical markers: x and label.
    pub markers: Vec<(f64, String)>,
    /// Axis maxima (data maxima when `None`).
    pub x_max: Option<f64>,
    /// See `x_max`.
    pub y_max: Option<f64>,
    /// Y axis minimum (default 0; negative values for residual plots).
    pub y_min: f64,
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `target` ticks.
fn tick_step(max: f64, target: f64) -> f64 {
    let raw = max / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_tick(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{v:.decimals$}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders `chart` as a standalone SVG document.
#[must_use]
pub fn render(chart: &Chart) -> String {
    let (w, h) = (760.0, 440.0);
    let (left, right, top, bottom) = (70.0, 20.0, 62.0, 52.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let data_max = |f: fn(&(f64, f64)) -> f64| {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(f))
            .fold(0.0f64, f64::max)
    };
    let x_max = chart.x_max.unwrap_or_else(|| data_max(|p| p.0)).max(1e-9);
    let y_max = chart.y_max.unwrap_or_else(|| data_max(|p| p.1)).max(1e-9);
    let sx = |x: f64| left + x.clamp(0.0, x_max) / x_max * pw;
    let y_min = chart.y_min.min(y_max - 1e-9);
    let sy = |y: f64| top + ph - (y.clamp(y_min, y_max) - y_min) / (y_max - y_min) * ph;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle" font-weight="bold">{}</text>"#,
        w / 2.0,
        escape(&chart.title)
    );
    let _ = writeln!(
        out,
        r##"<text x="{}" y="40" text-anchor="middle" fill="#444">{}</text>"##,
        w / 2.0,
        escape(&chart.subtitle)
    );
    // Grid and ticks.
    let xs = tick_step(x_max, 8.0);
    let ys = tick_step(y_max - y_min, 6.0);
    let mut x = 0.0;
    while x <= x_max * 1.000_001 {
        let px = sx(x);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + ph,
            top + ph + 16.0,
            fmt_tick(x, xs)
        );
        x += xs;
    }
    let mut y = (y_min / ys).ceil() * ys;
    while y <= y_max + ys * 1e-6 {
        let py = sy(y);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            py + 4.0,
            fmt_tick(y, ys)
        );
        y += ys;
    }
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        h - 12.0,
        escape(&chart.x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        top + ph / 2.0,
        top + ph / 2.0,
        escape(&chart.y_label)
    );
    for (mx, label) in &chart.markers {
        let px = sx(*mx);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}" fill="#c00" text-anchor="end">{}</text>"##,
            top + ph,
            px - 4.0,
            top + 14.0,
            escape(label)
        );
    }
    // Series, thinned to at most ~1500 points each.
    for s in &chart.series {
        let step = (s.points.len() / 1500).max(1);
        let mut path = String::new();
        for (i, (x, y)) in s.points.iter().enumerate() {
            if i % step != 0 && i + 1 != s.points.len() {
                continue;
            }
            let _ = write!(path, "{:.1},{:.1} ", sx(*x), sy(*y));
        }
        let dash = if s.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
            s.color,
            path.trim_end()
        );
    }
    // Legend.
    for (i, s) in chart.series.iter().enumerate() {
        let ly = top + 14.0 + 16.0 * i as f64;
        let lx = left + 10.0;
        let dash = if s.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 4.0,
            lx + 24.0,
            ly - 4.0,
            s.color,
            lx + 30.0,
            ly,
            escape(&s.name)
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_and_markers() {
        let chart = Chart {
            title: "t <1>".into(),
            series: vec![Series {
                name: "a".into(),
                color: "black".into(),
                points: vec![(0.0, 0.0), (1.0, 2.0)],
                dashed: true,
            }],
            markers: vec![(0.5, "m".into())],
            ..Chart::default()
        };
        let svg = render(&chart);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("stroke-dasharray=\"6,4\""));
        assert!(svg.contains("<polyline"));
    }
}
