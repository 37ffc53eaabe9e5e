//! A counterexample as an offline page (inline CSS and SVG, no scripts), in the spirit of
//! Porcupine's visualizer: the operations on a timeline, one row per process, the longest
//! linearizable prefix numbered in its order (green), the operation that had to come next
//! and fits nowhere (red), the operations the violation names (orange), the others grey,
//! then the findings, the faults and the explanation. `check-history --html` writes one per
//! history that is not linearizable; a failing property case writes one beside its
//! minimal history.

use std::{fmt::Write as _, path::Path};

use crate::linearizability::Counterexample;

/// What a page shows besides the timeline.
pub struct Page<'a> {
    /// The headline.
    pub title: String,
    /// The operations and what the search (or the checkers) made of them.
    pub counterexample: &'a Counterexample,
    /// Titled lists (the findings, the faults injected).
    pub sections: Vec<(String, Vec<String>)>,
    /// The explanation in words.
    pub explanation: &'a str,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const ROW: f64 = 34.0;
const LEFT: f64 = 70.0;
const WIDTH: f64 = 1100.0;

fn timeline(c: &Counterexample) -> String {
    let mut processes: Vec<u64> = c.ops.iter().map(|o| o.process).collect();
    processes.sort_unstable();
    processes.dedup();
    let t0 = c.ops.iter().map(|o| o.call).min().unwrap_or(0);
    let t1 = c
        .ops
        .iter()
        .map(|o| o.ret.unwrap_or(o.call))
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    // Unknown outcomes run to the right edge, a tenth past the last event.
    let end = t1 + (t1 - t0) / 10 + 1;
    let px = |t: u64| LEFT + (t - t0) as f64 / (end - t0) as f64 * (WIDTH - LEFT - 10.0);
    let height = ROW * processes.len() as f64 + 30.0;
    let mut s = format!(
        "<svg viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\" xmlns=\"http://www.w3.org/2000/svg\" \
         font-size=\"11\" font-family=\"monospace\">"
    );
    for (row, p) in processes.iter().enumerate() {
        let y = 10.0 + ROW * row as f64;
        let _ = write!(
            s,
            "<text x=\"4\" y=\"{}\">p{p}</text><line x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{}\" \
             y2=\"{}\" stroke=\"#f3f4f6\"/>",
            y + 16.0,
            y + ROW - 2.0,
            y + ROW - 2.0
        );
    }
    for (i, op) in c.ops.iter().enumerate() {
        let row = processes.iter().position(|&p| p == op.process).unwrap_or(0);
        let y = 10.0 + ROW * row as f64;
        let order = c.prefix.iter().position(|&k| k == i);
        let (fill, label) = if c.stuck == Some(i) {
            ("#dc2626", "stuck: must come next, fits nowhere".to_owned())
        } else if c.misfits.contains(&i) {
            ("#f59e0b", "named by the violation".to_owned())
        } else if let Some(n) = order {
            (
                "#16a34a",
                format!("#{} of the linearizable prefix", c.prefix_hidden + n + 1),
            )
        } else {
            ("#9ca3af", "not placed".to_owned())
        };
        let (x0, x1) = (px(op.call), px(op.ret.unwrap_or(end)));
        let dash = if op.ret.is_none() {
            " stroke-dasharray=\"4 2\" fill-opacity=\"0.35\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{}\" rx=\"3\" \
             fill=\"{fill}\" stroke=\"{fill}\"{dash}><title>p{} {} → {} [{}..{}]: {}</title>\
             </rect><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#111827\">{}{} → {}</text>",
            (x1 - x0).max(2.0),
            ROW - 8.0,
            op.process,
            esc(&op.op),
            esc(&op.recorded),
            op.call,
            op.ret.map_or_else(String::new, |r| r.to_string()),
            esc(&label),
            x0 + 3.0,
            y + 16.0,
            order.map_or_else(String::new, |n| format!("{}. ", c.prefix_hidden + n + 1)),
            esc(&op.op),
            esc(&op.recorded)
        );
    }
    s.push_str("</svg>");
    s
}

/// The page.
pub fn html(page: &Page<'_>) -> String {
    let c = page.counterexample;
    let part = if c.partition.is_empty() {
        String::new()
    } else {
        format!(" (partition {})", esc(&c.partition))
    };
    let mut sections = String::new();
    for (title, items) in &page.sections {
        let _ = write!(sections, "<h2>{}</h2><ul>", esc(title));
        if items.is_empty() {
            sections.push_str("<li>none</li>");
        }
        for item in items {
            let _ = write!(sections, "<li><code>{}</code></li>", esc(item));
        }
        sections.push_str("</ul>");
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:20px;color:#1f2937}}\
         .key span{{display:inline-block;padding:2px 8px;margin-right:8px;border-radius:3px;\
         color:#fff}}pre{{background:#f9fafb;padding:12px;overflow-x:auto}}</style></head><body>\
         <h1>{t}{part}</h1><p class=\"key\"><span style=\"background:#16a34a\">\
         linearizable prefix, in order</span><span style=\"background:#dc2626\">must come next, \
         fits nowhere</span><span style=\"background:#f59e0b\">named by the violation</span>\
         <span style=\"background:#9ca3af\">other operations</span> dashed: unknown outcome</p>\
         {}<p>{} operations shown{}{}</p>{sections}<h2>Why</h2><pre>{}</pre></body></html>\n",
        timeline(c),
        c.ops.len(),
        if c.prefix_hidden > 0 {
            format!(
                " (the prefix's first {} operations are left out)",
                c.prefix_hidden
            )
        } else {
            String::new()
        },
        if c.state.is_empty() {
            String::new()
        } else {
            format!(
                "; the model's state after the prefix: <code>{}</code>",
                esc(&c.state)
            )
        },
        esc(page.explanation),
        t = esc(&page.title),
    )
}

/// Writes `page` to `path`, creating its directory.
pub fn write(path: &Path, page: &Page<'_>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, html(page))
}
