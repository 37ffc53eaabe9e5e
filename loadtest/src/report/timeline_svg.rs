//! The timeline chart: throughput (requests/s and claims granted/s) above, latency (p50 and
//! p99) below, one shared time axis, and a dashed marker for each event (a fault injected).

use std::fmt::Write;

use super::{
    esc,
    svg::{nice_max, second_ticks},
};
use crate::timeline::Second;

const W: f64 = 760.0;
const PANEL: f64 = 170.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 24.0;
const GAP: f64 = 36.0;
const BOTTOM: f64 = 40.0;

/// A line to draw: label, colour, value per second.
type Line<'a> = (&'a str, &'a str, &'a dyn Fn(&Second) -> f64);

/// The chart of `seconds` with `markers` (seconds since start, label).
pub(crate) fn timeline(seconds: &[Second], markers: &[(f64, String)]) -> String {
    let h = TOP + PANEL + GAP + PANEL + BOTTOM;
    let x_max = (seconds.len() as f64).max(1.0);
    let px = |x: f64| LEFT + x / x_max * (W - LEFT - RIGHT);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="100%" role="img" aria-label="Requests, granted claims and latency per second">"#
    );
    let throughput: [Line; 2] = [
        ("requests/s", "#2563eb", &|x: &Second| x.requests as f64),
        ("claims granted/s", "#059669", &|x: &Second| {
            x.granted as f64
        }),
    ];
    let latency: [Line; 2] = [
        ("p50 ms", "#d97706", &|x: &Second| x.p50_ms),
        ("p99 ms", "#db2777", &|x: &Second| x.p99_ms),
    ];
    panel(&mut s, seconds, TOP, &throughput, &px);
    panel(&mut s, seconds, TOP + PANEL + GAP, &latency, &px);
    let bottom = TOP + PANEL + GAP + PANEL;
    second_ticks(&mut s, x_max, 8.0, bottom + 16.0, px);
    for (at, label) in markers {
        let x = px(at.clamp(0.0, x_max));
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom:.1}" stroke="#b91c1c" stroke-dasharray="4 3" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#b91c1c">{}</text>"##,
            x + 3.0,
            TOP + 10.0,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

fn panel(s: &mut String, seconds: &[Second], top: f64, lines: &[Line], px: &dyn Fn(f64) -> f64) {
    let top_value = lines
        .iter()
        .flat_map(|(_, _, f)| seconds.iter().map(f))
        .fold(0.0, f64::max);
    let y_max = nice_max(top_value * 1.1);
    let py = |v: f64| top + PANEL - v / y_max * PANEL;
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{top:.1}" x2="{LEFT}" y2="{:.1}" stroke="#888"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/>"##,
        top + PANEL,
        top + PANEL,
        W - RIGHT,
        top + PANEL
    );
    for i in 0..=4 {
        let v = y_max * f64::from(i) / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#eee"/><text x="{2:.1}" y="{3:.1}" font-size="11" text-anchor="end" fill="#555">{v:.0}</text>"##,
            py(v),
            W - RIGHT,
            LEFT - 6.0,
            py(v) + 4.0
        );
    }
    for (i, (label, colour, f)) in lines.iter().enumerate() {
        let mut path = String::new();
        for (n, x) in seconds.iter().enumerate() {
            // Each point sits at the end of its second.
            let _ = write!(
                path,
                "{}{:.1},{:.1}",
                if n == 0 { "M" } else { " L" },
                px(x.second as f64 + 1.0),
                py(f(x))
            );
        }
        let _ = write!(
            s,
            r##"<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/><rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222">{label}</text>"##,
            LEFT + 10.0 + 150.0 * i as f64,
            top - 12.0,
            LEFT + 28.0 + 150.0 * i as f64,
            top - 8.0
        );
    }
}
