//! The search's report: `capacity.json`, `capacity.md` (CI job summaries), an offline
//! `index.html` with the hockey stick (response time against offered load, the objective
//! and the knee marked, the closed loop's figure beside) and `report.junit.xml`.

use std::{fmt::Write as _, path::Path};

use anyhow::Context;

use super::{Capacity, Step};
use crate::{
    progress::phase,
    report::{esc, html::CSS, svg::nice_max},
};

/// Writes every file of the report into `dir`.
pub(super) fn write_all(dir: &Path, c: &Capacity) -> anyhow::Result<()> {
    let files = [
        (
            "capacity.json",
            serde_json::to_string_pretty(c).context("encoding the result")?,
        ),
        ("capacity.md", markdown(c)),
        ("index.html", html(c)),
        ("report.junit.xml", junit(c)),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn knee_text(c: &Capacity) -> String {
    match c.knee {
        Some(k) if c.knee_generator_limited => format!(
            "{k:.0}/s — set by the load generator, which fell behind the schedule at the next \
             rate: the server's own knee is at or above it"
        ),
        Some(k) => format!("{k:.0}/s"),
        None if c.exit_code == 1 => "none: an invariant broke".into(),
        None => "none (no step met the objective)".into(),
    }
}

fn closed_text(c: &Capacity) -> Option<String> {
    c.closed.as_ref().map(|cl| {
        format!(
            "closed loop of {} users (after the first step's arrivals, on its sale): {:.0} \
             visits/s at p99 {:.2} ms — it slows down with the server instead of queueing \
             shoppers, so its latency is not what shoppers arriving at will wait",
            cl.users, cl.per_sec, cl.visit_ms.p99
        )
    })
}

/// The search on the console.
pub(super) fn print_summary(c: &Capacity, dir: &Path) {
    phase(
        "capacity",
        format!("knee: {} ({})", knee_text(c), c.slo_text),
    );
    if let Some(line) = closed_text(c) {
        phase("capacity", line);
    }
    for f in &c.failures {
        phase("capacity", format!("FAIL: {f}"));
    }
    phase(
        "capacity",
        format!("exit {}: {}", c.exit_code, dir.join("index.html").display()),
    );
}

fn step_cells(s: &Step) -> Vec<String> {
    vec![
        format!("{:.0}", s.rate),
        format!("{:.0}", s.achieved_per_sec),
        format!("{:.2}", s.response_ms.p50),
        format!("{:.2}", s.response_ms.p99),
        format!("{:.2}", s.service_ms.p99),
        format!("{:.2}%", s.error_share * 100.0),
        if s.invariants_ok { "held" } else { "BROKEN" }.into(),
        match (s.invariants_ok && s.slo_met, s.generator_limited) {
            (true, _) => "holds".into(),
            (false, true) => "does not hold (generator behind)".into(),
            (false, false) => "does not hold".into(),
        },
        s.run_id.clone(),
    ]
}

const HEADER: [&str; 9] = [
    "arrivals/s",
    "started/s",
    "response p50 ms",
    "response p99 ms",
    "service p99 ms",
    "dropped or failed",
    "invariants",
    "objective",
    "run (steps/)",
];

fn sorted(c: &Capacity) -> Vec<&Step> {
    let mut steps: Vec<&Step> = c.steps.iter().collect();
    steps.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    steps
}

fn markdown(c: &Capacity) -> String {
    let mark = if c.exit_code == 0 { "✅" } else { "❌" };
    let mut s = format!(
        "# {mark} capacity of `{}`: knee {}\n\nObjective: {} (response time from each \
         arrival's intended start). Commit `{}`, started {}.\n\n",
        c.scenario,
        knee_text(c),
        c.slo_text,
        c.git_commit,
        c.started_at
    );
    if let Some(line) = closed_text(c) {
        let _ = writeln!(s, "Closed model: {line}.\n");
    }
    for f in &c.failures {
        let _ = writeln!(s, "- **{f}**");
    }
    let _ = writeln!(
        s,
        "\n| {} |\n|{}",
        HEADER.join(" | "),
        "---|".repeat(HEADER.len())
    );
    for step in sorted(c) {
        let _ = writeln!(s, "| {} |", step_cells(step).join(" | "));
    }
    s
}

/// Response time against offered load: the objective's percentile per step, the objective
/// as a line, the knee as a line, and the closed loop as a point of its own.
fn chart(c: &Capacity) -> String {
    const W: f64 = 760.0;
    const H: f64 = 320.0;
    const L: f64 = 70.0;
    const R: f64 = 20.0;
    const T: f64 = 20.0;
    const B: f64 = 50.0;
    let steps = sorted(c);
    let x_max = nice_max(
        steps
            .iter()
            .map(|s| s.rate)
            .chain(c.closed.iter().map(|cl| cl.per_sec))
            .fold(1.0, f64::max),
    );
    let y_top = steps
        .iter()
        .map(|s| s.slo_value_ms)
        .chain(c.closed.iter().map(|cl| cl.visit_ms.p99))
        .fold(c.slo.below_ms * 1.5, f64::max);
    // Past three objectives the curve is off the chart: the shape of the knee is the point.
    let y_max = nice_max(y_top.min(c.slo.below_ms * 3.0));
    let px = |x: f64| L + x / x_max * (W - L - R);
    let py = |y: f64| T + (1.0 - y.min(y_max) / y_max) * (H - T - B);
    let mut s = format!(
        "<svg viewBox=\"0 0 {W} {H}\" width=\"100%\" role=\"img\" aria-label=\"response time \
         against offered load\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">"
    );
    for i in 0..=5 {
        let (x, y) = (x_max * f64::from(i) / 5.0, y_max * f64::from(i) / 5.0);
        let _ = write!(
            s,
            "<line x1=\"{L}\" x2=\"{}\" y1=\"{py}\" y2=\"{py}\" stroke=\"#e5e7eb\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{y:.0}</text>\
             <text x=\"{px}\" y=\"{}\" text-anchor=\"middle\">{x:.0}</text>",
            W - R,
            L - 6.0,
            py(y) + 4.0,
            H - B + 16.0,
            py = py(y),
            px = px(x)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">offered load (arrivals/s)</text>\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">\
         response {} (ms)</text>",
        (L + W - R) / 2.0,
        H - 8.0,
        (T + H - B) / 2.0,
        (T + H - B) / 2.0,
        esc(c.slo.quantile.name())
    );
    let slo_y = py(c.slo.below_ms);
    let _ = write!(
        s,
        "<line x1=\"{L}\" x2=\"{}\" y1=\"{slo_y}\" y2=\"{slo_y}\" stroke=\"#dc2626\" \
         stroke-dasharray=\"6 4\"/><text x=\"{}\" y=\"{}\" fill=\"#dc2626\" \
         text-anchor=\"end\">objective {} &lt; {} ms</text>",
        W - R,
        W - R,
        slo_y - 6.0,
        esc(c.slo.quantile.name()),
        c.slo.below_ms
    );
    if let Some(k) = c.knee {
        let _ = write!(
            s,
            "<line x1=\"{x}\" x2=\"{x}\" y1=\"{T}\" y2=\"{}\" stroke=\"#059669\" \
             stroke-dasharray=\"4 3\"/><text x=\"{}\" y=\"{}\" fill=\"#059669\">knee \
             {k:.0}/s</text>",
            H - B,
            px(k) + 4.0,
            T + 12.0,
            x = px(k)
        );
    }
    let points: Vec<String> = steps
        .iter()
        .map(|st| format!("{:.1},{:.1}", px(st.rate), py(st.slo_value_ms)))
        .collect();
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\" points=\"{}\"/>",
        points.join(" ")
    );
    for st in &steps {
        let colour = if st.invariants_ok && st.slo_met {
            "#2563eb"
        } else {
            "#dc2626"
        };
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\"><title>{:.0}/s: {} \
             {:.2} ms</title></circle>",
            px(st.rate),
            py(st.slo_value_ms),
            st.rate,
            esc(c.slo.quantile.name()),
            st.slo_value_ms
        );
    }
    // The error budget on a scale of its own (right axis): a step may fail on it alone.
    let share_max = steps
        .iter()
        .map(|st| st.error_share)
        .fold(c.slo.error_budget * 2.0, f64::max)
        .max(0.001);
    let ps = |v: f64| T + (1.0 - v.min(share_max) / share_max) * (H - T - B);
    let budget_y = ps(c.slo.error_budget);
    let _ = write!(
        s,
        "<line x1=\"{L}\" x2=\"{}\" y1=\"{budget_y}\" y2=\"{budget_y}\" stroke=\"#7c3aed\" \
         stroke-dasharray=\"2 3\"/><text x=\"{}\" y=\"{}\" fill=\"#7c3aed\" \
         text-anchor=\"end\">error budget {:.1}% (right axis: dropped or failed)</text>\
         <text x=\"{}\" y=\"{}\" fill=\"#7c3aed\" text-anchor=\"end\">{:.1}%</text>",
        W - R,
        W - R,
        budget_y + 14.0,
        c.slo.error_budget * 100.0,
        W - 2.0,
        T + 4.0,
        share_max * 100.0
    );
    let shares: Vec<String> = steps
        .iter()
        .map(|st| format!("{:.1},{:.1}", px(st.rate), ps(st.error_share)))
        .collect();
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"#7c3aed\" stroke-dasharray=\"4 2\" points=\"{}\"/>",
        shares.join(" ")
    );
    for st in &steps {
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"#7c3aed\"><title>\
             {:.0}/s: {:.2}% dropped or failed</title></rect>",
            px(st.rate) - 3.0,
            ps(st.error_share) - 3.0,
            st.rate,
            st.error_share * 100.0
        );
    }
    if let Some(cl) = &c.closed {
        let (x, y) = (px(cl.per_sec), py(cl.visit_ms.p99));
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"9\" height=\"9\" fill=\"#d97706\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"#d97706\" text-anchor=\"end\">closed loop, {} \
             users (p99)</text>",
            x - 4.5,
            y - 4.5,
            x - 8.0,
            y - 8.0,
            cl.users
        );
    }
    s.push_str("</svg>");
    s
}

fn html(c: &Capacity) -> String {
    let class = if c.exit_code == 0 { "pass" } else { "fail" };
    let mut s = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>capacity of {} \
         — coupon-loadtest</title><style>{CSS}</style></head><body><div class=\"banner \
         {class}\">capacity of {}: knee {}<small>exit code {} · commit {} · {}</small></div>\
         <main><p>Objective: {} (response time from each arrival's intended start). Each \
         step is a whole open-model run, audited; its report is in <code>steps/</code>.</p>",
        esc(&c.scenario),
        esc(&c.scenario),
        esc(&knee_text(c)),
        c.exit_code,
        esc(&c.git_commit),
        esc(&c.started_at),
        esc(&c.slo_text)
    );
    if let Some(line) = closed_text(c) {
        let _ = write!(s, "<p class=\"muted\">{}</p>", esc(&line));
    }
    if !c.failures.is_empty() {
        s.push_str("<h2>Why it failed</h2><ul>");
        for f in &c.failures {
            let _ = write!(s, "<li class=\"bad\">{}</li>", esc(f));
        }
        s.push_str("</ul>");
    }
    let _ = write!(
        s,
        "<h2>Response time against offered load</h2><div class=\"figure\">{}</div>\
         <h2>Steps</h2><table><tr>",
        chart(c)
    );
    for h in HEADER {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for step in sorted(c) {
        s.push_str("<tr>");
        for cell in step_cells(step) {
            let _ = write!(s, "<td>{}</td>", esc(&cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table></main></body></html>\n");
    s
}

/// Each step's invariants a test case (a break is a failure), and the required rate one.
fn junit(c: &Capacity) -> String {
    let mut cases = String::new();
    let mut failures = 0;
    let mut count = 0;
    for st in &c.steps {
        count += 1;
        let name = format!("invariants at {:.0} arrivals/s", st.rate);
        if st.invariants_ok {
            let _ = writeln!(
                cases,
                "    <testcase classname=\"capacity.{}\" name=\"{}\"/>",
                esc(&c.scenario),
                esc(&name)
            );
        } else {
            failures += 1;
            let _ = writeln!(
                cases,
                "    <testcase classname=\"capacity.{}\" name=\"{}\">\n      <failure \
                 message=\"{}\" type=\"invariants\">{}</failure>\n    </testcase>",
                esc(&c.scenario),
                esc(&name),
                esc(st.failures.first().map_or("violated", String::as_str)),
                esc(&st.failures.join("\n"))
            );
        }
    }
    if let Some(r) = c.require_rate {
        count += 1;
        let name = format!("knee at least {r:.0} arrivals/s ({})", c.slo_text);
        match c.knee {
            Some(k) if k >= r => {
                let _ = writeln!(
                    cases,
                    "    <testcase classname=\"capacity.{}\" name=\"{}\"/>",
                    esc(&c.scenario),
                    esc(&name)
                );
            }
            _ => {
                failures += 1;
                let _ = writeln!(
                    cases,
                    "    <testcase classname=\"capacity.{}\" name=\"{}\">\n      <failure \
                     message=\"knee {}\" type=\"capacity\"/>\n    </testcase>",
                    esc(&c.scenario),
                    esc(&name),
                    esc(&knee_text(c))
                );
            }
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"coupon-loadtest \
         capacity\" tests=\"{count}\" failures=\"{failures}\" errors=\"0\">\n  <testsuite \
         name=\"capacity.{}\" tests=\"{count}\" failures=\"{failures}\" errors=\"0\">\n{cases}  \
         </testsuite>\n</testsuites>\n",
        esc(&c.scenario)
    )
}
