//! A counterexample as an offline page (inline CSS and SVG, no scripts), in the spirit of
//! Porcupine's visualizer: the operations on a timeline, one row per process, the longest
//! linearizable prefix numbered in its order (green), the operation that had to come next
//! and fits nowhere (red), the operations the violation names (orange), the others grey,
//! then the findings, the faults (a row of their own) and the explanation. `check-history
//! --html` writes one per history that is not linearizable, a failing property case one
//! beside its minimal history, and a load run whose invariants failed one beside its report.
//! Pure: the caller writes the text where it wants it.

use std::fmt::Write as _;

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

/// The process id of the nemesis's row: faults are operations of the history too (as in
/// Jepsen), drawn on a row of their own.
pub const NEMESIS: u64 = u64::MAX;

fn process_name(p: u64) -> String {
    if p == NEMESIS {
        "nemesis".to_owned()
    } else {
        format!("p{p}")
    }
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
            "<text x=\"4\" y=\"{}\">{}</text><line x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{}\" \
             y2=\"{}\" stroke=\"#f3f4f6\"/>",
            y + 16.0,
            process_name(*p),
            y + ROW - 2.0,
            y + ROW - 2.0
        );
    }
    for (i, op) in c.ops.iter().enumerate() {
        let row = processes.iter().position(|&p| p == op.process).unwrap_or(0);
        let y = 10.0 + ROW * row as f64;
        let order = c.prefix.iter().position(|&k| k == i);
        let (fill, label) = if op.process == NEMESIS {
            ("#7c3aed", "a fault the nemesis injected".to_owned())
        } else if c.stuck == Some(i) {
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
             fill=\"{fill}\" stroke=\"{fill}\"{dash}><title>{} {} → {} [{}..{}]: {}</title>\
             </rect><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#111827\">{}{} → {}</text>",
            (x1 - x0).max(2.0),
            ROW - 8.0,
            process_name(op.process),
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

/// The colour key, of the colours the timeline uses.
fn key(c: &Counterexample) -> String {
    let searched = !c.prefix.is_empty() || c.stuck.is_some();
    let faults = c.ops.iter().any(|o| o.process == NEMESIS);
    [
        (searched, "#16a34a", "linearizable prefix, in order"),
        (c.stuck.is_some(), "#dc2626", "must come next, fits nowhere"),
        (!c.misfits.is_empty(), "#f59e0b", "named by the violation"),
        (true, "#9ca3af", "other operations"),
        (faults, "#7c3aed", "faults"),
    ]
    .into_iter()
    .filter(|(shown, ..)| *shown)
    .map(|(_, colour, what)| format!("<span style=\"background:{colour}\">{what}</span>"))
    .collect()
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
         <h1>{t}{part}</h1><p class=\"key\">{}dashed: unknown outcome</p>\
         {}<p>{} operations shown{}{}</p>{sections}<h2>Why</h2><pre>{}</pre></body></html>\n",
        key(c),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::OpView;

    fn op(process: u64, call: u64, ret: Option<u64>) -> OpView {
        OpView {
            process,
            op: format!("op of {process}"),
            recorded: "ok".into(),
            call,
            ret,
        }
    }

    #[test]
    fn the_key_lists_only_the_colours_drawn_and_faults_get_a_row_of_their_own() {
        let c = Counterexample {
            partition: String::new(),
            ops: vec![op(3, 0, Some(10)), op(NEMESIS, 5, None)],
            prefix: Vec::new(),
            prefix_hidden: 0,
            stuck: None,
            misfits: vec![0],
            state: String::new(),
        };
        let text = html(&Page {
            title: "t".into(),
            counterexample: &c,
            sections: Vec::new(),
            explanation: "why",
        });
        assert!(text.contains(">nemesis</text>"), "{text}");
        assert!(text.contains(">p3</text>"), "{text}");
        assert!(text.contains("named by the violation</span>"), "{text}");
        assert!(text.contains(">faults</span>"), "{text}");
        assert!(!text.contains("linearizable prefix, in order"), "{text}");
        assert!(!text.contains("fits nowhere</span>"), "{text}");
    }
}
