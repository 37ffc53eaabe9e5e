//! `check-history --html DIR`: a page per history that is not linearizable, offline (inline
//! CSS and SVG, no scripts), in the spirit of Porcupine's visualizer: the operations near the
//! violation on a timeline, one row per process, the longest linearizable prefix numbered in
//! its order (green), the operation that had to come next and fits nowhere (red), the
//! candidates the model contradicted there (orange), the others grey, and the explanation.

use std::{fmt::Write as _, path::Path};

use anyhow::Context;
use coupon_proptests::linearizability::Counterexample;

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
            (
                "#f59e0b",
                "the model contradicts its answer here".to_owned(),
            )
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

/// The page of `file`'s violation.
pub fn html(file: &str, explanation: &str, c: &Counterexample) -> String {
    let part = if c.partition.is_empty() {
        String::new()
    } else {
        format!(" (partition {})", esc(&c.partition))
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>not linearizable: \
         {f}</title><style>body{{font-family:system-ui,sans-serif;margin:20px;color:#1f2937}}\
         .key span{{display:inline-block;padding:2px 8px;margin-right:8px;border-radius:3px;\
         color:#fff}}pre{{background:#f9fafb;padding:12px;overflow-x:auto}}</style></head><body>\
         <h1>not linearizable: {f}{part}</h1><p class=\"key\"><span style=\"background:#16a34a\">\
         linearizable prefix, in order</span><span style=\"background:#dc2626\">must come next, \
         fits nowhere</span><span style=\"background:#f59e0b\">answer contradicted</span><span \
         style=\"background:#9ca3af\">not placed</span> dashed: unknown outcome</p>{}<p>{} \
         operations shown{}; the model's state after the prefix: <code>{}</code></p><h2>Why</h2>\
         <pre>{}</pre></body></html>\n",
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
        esc(&c.state),
        esc(explanation),
        f = esc(file),
    )
}

/// Writes the page of `file` into `dir`; its path.
pub fn write(
    dir: &Path,
    file: &Path,
    explanation: &str,
    c: &Counterexample,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = file
        .file_name()
        .map_or_else(|| "history".into(), |n| n.to_string_lossy().into_owned());
    let path = dir.join(format!("{name}.html"));
    std::fs::write(&path, html(&file.display().to_string(), explanation, c))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
