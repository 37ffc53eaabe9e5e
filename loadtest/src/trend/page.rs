//! The trend page: one small line chart per figure, runs in start order along the bottom
//! (labelled with their commits), the baseline dashed, a goal dotted, regressions in red.
//! Inline CSS and SVG, no scripts, no network.

use std::fmt::Write as _;

use super::Series;
use crate::report::{esc, html::CSS, svg::nice_max};

const W: f64 = 520.0;
const H: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 56.0;

fn chart(s: &Series) -> String {
    let n = s.points.len();
    let y_max = nice_max(
        s.points
            .iter()
            .flat_map(|p| [Some(p.value), p.baseline, p.goal])
            .flatten()
            .fold(0.0, f64::max),
    );
    let px = |i: usize| {
        if n <= 1 {
            (LEFT + W - RIGHT) / 2.0
        } else {
            LEFT + i as f64 / (n - 1) as f64 * (W - LEFT - RIGHT)
        }
    };
    let py = |v: f64| TOP + (1.0 - v / y_max) * (H - TOP - BOTTOM);
    let mut svg = format!(
        "<svg viewBox=\"0 0 {W} {H}\" width=\"100%\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-size=\"11\" role=\"img\" aria-label=\"{}\">",
        esc(&s.name)
    );
    for i in 0..=4 {
        let v = y_max * f64::from(i) / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#e5e7eb\"/><text \
             x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            py(v) + 4.0,
            if y_max >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            },
            y = py(v)
        );
    }
    // A reference line per run segment: baselines and goals may change between runs.
    for (kind, dash, colour) in [("baseline", "6 4", "#6b7280"), ("goal", "2 3", "#059669")] {
        let points: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let v = if kind == "baseline" {
                    p.baseline
                } else {
                    p.goal
                };
                v.map(|v| format!("{:.1},{:.1}", px(i), py(v)))
            })
            .collect();
        if !points.is_empty() {
            let _ = write!(
                svg,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-dasharray=\"{dash}\" \
                 points=\"{}\"><title>{kind}</title></polyline>",
                points.join(" ")
            );
        }
    }
    let line: Vec<String> = s
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{:.1},{:.1}", px(i), py(p.value)))
        .collect();
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\" points=\"{}\"/>",
        line.join(" ")
    );
    for (i, p) in s.points.iter().enumerate() {
        let colour = if p.regressed { "#dc2626" } else { "#2563eb" };
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{}\" fill=\"{colour}\"><title>{} {}: {:.3}{}\
             </title></circle><text x=\"{:.1}\" y=\"{}\" text-anchor=\"end\" \
             transform=\"rotate(-40 {:.1} {})\">{}</text>",
            px(i),
            py(p.value),
            if p.regressed { 5 } else { 3 },
            esc(&p.commit),
            esc(&p.started_at),
            p.value,
            if p.regressed { " (regression)" } else { "" },
            px(i),
            H - BOTTOM + 14.0,
            px(i),
            H - BOTTOM + 14.0,
            esc(&p.commit)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The whole page.
pub(super) fn html(series: &[Series], reports: usize) -> String {
    let regressions = series
        .iter()
        .flat_map(|s| s.points.iter().filter(|p| p.regressed).map(move |p| (s, p)))
        .count();
    let mut page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>trend — \
         coupon-loadtest</title><style>{CSS}.grid{{display:grid;grid-template-columns:\
         repeat(auto-fill,minmax(480px,1fr));gap:16px}}</style></head><body><div \
         class=\"banner {}\">trend over {reports} reports<small>{} figures · {regressions} \
         regressions marked (red) · baseline dashed, goal dotted</small></div><main><div \
         class=\"grid\">",
        if regressions == 0 { "pass" } else { "fail" },
        series.len()
    );
    for s in series {
        let _ = write!(
            page,
            "<div class=\"figure\"><h3>{}</h3><p class=\"muted\">{} · {} runs</p>{}</div>",
            esc(&s.name),
            if s.higher_is_better {
                "higher is better"
            } else {
                "lower is better"
            },
            s.points.len(),
            chart(s)
        );
    }
    page.push_str("</div></main></body></html>\n");
    page
}
