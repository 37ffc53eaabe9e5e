//! Inline SVG charts for the HTML report: no scripts, no external resources.

use std::fmt::Write;

use super::esc;
use crate::stats::{ClaimSeries, EndpointStats};

/// Line colours, in order.
const COLOURS: [&str; 6] = [
    "#2563eb", "#d97706", "#059669", "#7c3aed", "#db2777", "#0891b2",
];

/// Chart size and margins.
const W: f64 = 760.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 44.0;

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// A "nice" axis maximum at or above `v`.
pub(crate) fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * mag >= v {
            return step * mag;
        }
    }
    10.0 * mag
}

/// Stocks above this multiple of the most granted coupons are left off the chart.
const STOCK_ZOOM: f64 = 4.0;

/// A step of 1, 2 or 5 times a power of ten, at least `v` and at least 1.
pub(super) fn nice_step(v: f64) -> f64 {
    if v <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 5.0, 10.0] {
        if step * mag >= v {
            return step * mag;
        }
    }
    10.0 * mag
}

/// Cumulative granted claims per second against each template's stock line.
pub(crate) fn claims_over_time(series: &[ClaimSeries]) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.last().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let granted_top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1 as f64))
        .fold(0.0, f64::max);
    // A stock far above what was granted would flatten the lines: leave it off the chart.
    let on_chart = |stock: i64| (stock as f64) <= (granted_top * STOCK_ZOOM).max(10.0);
    let y_top = series
        .iter()
        .filter(|s| on_chart(s.stock))
        .map(|s| s.stock as f64)
        .fold(granted_top, f64::max);
    let y_max = nice_max(y_top * 1.1);
    let px = |x: f64| LEFT + x / x_max * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / y_max * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="Granted claims over time against stock">"#
    );
    axes(&mut s, y_max, |v| format!("{v:.0}"), px(0.0), py);
    seconds_axis(&mut s, x_max, px);
    for (i, ser) in series.iter().enumerate() {
        let c = colour(i);
        if on_chart(ser.stock) {
            let y = py(ser.stock as f64);
            let _ = write!(
                s,
                r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}" stroke-dasharray="6 4" stroke-width="1.5"/>"#,
                W - RIGHT
            );
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" fill="{c}">stock {}</text>"#,
                LEFT + 8.0 + 90.0 * i as f64,
                y + 14.0,
                ser.stock
            );
        } else {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="{c}">stock {} (above the chart)</text>"#,
                W - RIGHT - 4.0,
                TOP + 10.0 + 16.0 * i as f64,
                ser.stock
            );
        }
        let mut path = format!("M{:.1},{:.1}", px(0.0), py(0.0));
        for (sec, total) in &ser.points {
            let _ = write!(path, " L{:.1},{:.1}", px(*sec as f64), py(*total as f64));
        }
        let _ = write!(
            s,
            r#"<path d="{path}" fill="none" stroke="{c}" stroke-width="2.5"/>"#
        );
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222">{} — granted (cumulative)</text>"##,
            LEFT + 10.0,
            TOP + 6.0 + 16.0 * i as f64,
            LEFT + 28.0,
            TOP + 10.0 + 16.0 * i as f64,
            esc(&ser.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// X axis labelled in seconds since the load began.
fn seconds_axis(s: &mut String, x_max: f64, px: impl Fn(f64) -> f64) {
    second_ticks(s, x_max, 6.0, H - BOTTOM + 16.0, px);
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">seconds since the load began</text>"##,
        (LEFT + W - RIGHT) / 2.0,
        H - 6.0
    );
}

/// One grid line per decade of milliseconds, from `lo` to `hi` (log10).
fn log_grid(s: &mut String, lo: f64, hi: f64, py: impl Fn(f64) -> f64) {
    let mut d = lo;
    while d <= hi + 1e-9 {
        let v = 10f64.powf(d);
        let y = py(v);
        let text = if v < 1.0 {
            format!("{v:.1} ms")
        } else {
            format!("{v:.0} ms")
        };
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{text}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
        d += 1.0;
    }
}

/// About `ticks` labels `Ns` along an axis of `x_max` seconds, at height `y`.
pub(super) fn second_ticks(
    s: &mut String,
    x_max: f64,
    ticks: f64,
    y: f64,
    px: impl Fn(f64) -> f64,
) {
    let step = nice_step(x_max / ticks);
    let mut x = 0.0;
    while x <= x_max + 1e-9 {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{y:.1}" font-size="11" text-anchor="middle" fill="#555">{x:.0}s</text>"##,
            px(x)
        );
        x += step;
    }
}

/// Y axis with five grid lines, labelled by `label`.
fn axes(
    s: &mut String,
    y_max: f64,
    label: impl Fn(f64) -> String,
    x0: f64,
    py: impl Fn(f64) -> f64,
) {
    let _ = write!(
        s,
        r##"<line x1="{x0:.1}" y1="{TOP}" x2="{x0:.1}" y2="{:.1}" stroke="#888"/><line x1="{x0:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/>"##,
        H - BOTTOM,
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM
    );
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let y = py(v);
        let _ = write!(
            s,
            r##"<line x1="{x0:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}</text>"##,
            W - RIGHT,
            x0 - 6.0,
            y + 4.0,
            label(v)
        );
    }
}

/// Grouped bars of p50/p95/p99/max per endpoint, on a log scale (ms).
pub(crate) fn latency_bars(endpoints: &[EndpointStats]) -> String {
    let top = endpoints.iter().map(|e| e.max_ms).fold(0.1, f64::max);
    let decades_hi = top.log10().ceil().max(0.0);
    let decades_lo = -1.0f64;
    let span = decades_hi - decades_lo;
    let py = |ms: f64| {
        let l = ms.max(0.1).log10();
        H - BOTTOM - (l - decades_lo) / span * (H - TOP - BOTTOM)
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="Latency percentiles per endpoint (log scale)">"#
    );
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#888"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/>"##,
        H - BOTTOM,
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM
    );
    log_grid(&mut s, decades_lo, decades_hi, py);
    let n = endpoints.len().max(1) as f64;
    let group = (W - LEFT - RIGHT) / n;
    let bar = (group * 0.8 / 4.0).min(28.0);
    for (i, e) in endpoints.iter().enumerate() {
        let x0 = LEFT + group * i as f64 + (group - bar * 4.0) / 2.0;
        for (j, (label, v)) in [
            ("p50", e.p50_ms),
            ("p95", e.p95_ms),
            ("p99", e.p99_ms),
            ("max", e.max_ms),
        ]
        .into_iter()
        .enumerate()
        {
            let y = py(v);
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {label}: {v:.2} ms</title></rect>"#,
                x0 + bar * j as f64,
                bar - 2.0,
                (H - BOTTOM - y).max(0.5),
                colour(j),
                esc(&e.name)
            );
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#222">{}</text>"##,
            x0 + bar * 2.0,
            H - BOTTOM + 16.0,
            esc(&e.name)
        );
    }
    for (j, label) in ["p50", "p95", "p99", "max"].iter().enumerate() {
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222">{label}</text>"##,
            LEFT + 10.0 + 56.0 * j as f64,
            H - 16.0,
            colour(j),
            LEFT + 24.0 + 56.0 * j as f64,
            H - 7.0
        );
    }
    s.push_str("</svg>");
    s
}

/// One stacked horizontal bar per endpoint: 2xx, refusals (4xx), failures.
pub(crate) fn outcome_bars(endpoints: &[EndpointStats]) -> String {
    let row = 26.0;
    let h = TOP + row * endpoints.len() as f64 + 30.0;
    let left = 200.0;
    let width = W - left - RIGHT;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="100%" role="img" aria-label="Outcomes per endpoint">"#
    );
    for (i, e) in endpoints.iter().enumerate() {
        let y = TOP + row * i as f64;
        let total = e.count.max(1) as f64;
        let mut x = left;
        for (n, c, what) in [
            (e.ok, "#16a34a", "2xx"),
            (e.refused, "#f59e0b", "refused (4xx)"),
            (e.failed, "#dc2626", "timeout/5xx"),
        ] {
            let w = n as f64 / total * width;
            if n > 0 {
                let _ = write!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{c}"><title>{} {what}: {n}</title></rect>"#,
                    row - 8.0,
                    esc(&e.name)
                );
            }
            x += w;
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end" fill="#222">{} ({})</text>"##,
            left - 8.0,
            y + 13.0,
            esc(&e.name),
            e.count
        );
    }
    for (j, (c, label)) in [
        ("#16a34a", "2xx"),
        ("#f59e0b", "refused (4xx)"),
        ("#dc2626", "timeout / 5xx"),
    ]
    .iter()
    .enumerate()
    {
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222">{label}</text>"##,
            left + 120.0 * j as f64,
            h - 18.0,
            left + 14.0 + 120.0 * j as f64,
            h - 9.0
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_maxima() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(9.0), 10.0);
        assert_eq!(nice_max(550.0), 1000.0);
        assert_eq!(nice_max(120.0), 200.0);
        assert_eq!(nice_max(230.0), 250.0);
        assert_eq!(nice_step(2.1), 5.0);
        assert_eq!(nice_step(0.3), 1.0);
        assert_eq!(nice_step(4.0), 5.0);
    }
}
