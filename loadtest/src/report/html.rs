//! `index.html`: a self-contained page (inline CSS and SVG, no scripts, no external
//! resources) with the verdict banner, invariant table, claims-over-time chart, latency
//! percentiles, status codes, thresholds, baseline comparison and configuration.

use std::fmt::Write;

use super::{Report, esc, svg, timeline_svg};

/// Page style.
pub(crate) const CSS: &str = "
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2937;background:#f9fafb}
main{max-width:1100px;margin:0 auto;padding:0 20px 40px}
.banner{padding:22px 28px;color:#fff;font-size:26px;font-weight:700}
.banner small{display:block;font-size:14px;font-weight:400;opacity:.9;margin-top:4px}
.pass{background:#15803d}.fail{background:#b91c1c}
h2{margin-top:32px;border-bottom:2px solid #e5e7eb;padding-bottom:4px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:14px}
th,td{border:1px solid #e5e7eb;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#15803d;font-weight:600}.bad{color:#b91c1c;font-weight:700}
ul.details{margin:4px 0 0 16px;padding:0;font-size:13px}
.muted{color:#6b7280;font-size:13px}
.figure{background:#fff;border:1px solid #e5e7eb;padding:10px;margin:10px 0}
pre{background:#fff;border:1px solid #e5e7eb;padding:10px;overflow:auto;font-size:13px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #e5e7eb;padding:10px 16px;min-width:140px}
.card b{display:block;font-size:22px}
";

/// Details shown per invariant in the page.
const SHOWN: usize = 20;

/// The HTML text of `r`.
pub(crate) fn render(r: &Report) -> String {
    let mut s = String::new();
    let class = if r.exit_code == 0 { "pass" } else { "fail" };
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{} {} — coupon-loadtest</title><style>{CSS}</style></head><body>",
        esc(&r.verdict),
        esc(&r.scenario)
    );
    let _ = write!(
        s,
        "<div class=\"banner {class}\">{} — {}<small>exit code {} · run {} · commit {} · {}</small></div><main>",
        esc(&r.verdict),
        esc(&r.scenario),
        r.exit_code,
        esc(&r.run_id),
        esc(&r.git_commit),
        esc(&r.target)
    );
    let _ = write!(
        s,
        "<p class=\"muted\">Checks: {}</p>",
        esc(&super::composed::summary(&r.checks))
    );
    if !r.failures.is_empty() {
        s.push_str("<h2>Why it failed</h2><ul>");
        for f in &r.failures {
            let _ = write!(s, "<li class=\"bad\">{}</li>", esc(f));
        }
        s.push_str("</ul>");
        if let Some(page) = &r.counterexample {
            let _ = write!(
                s,
                "<p>The answers the failures name, on a timeline: <a href=\"{0}\">{0}</a></p>",
                esc(page)
            );
        }
    }
    summary_cards(&mut s, r);
    if !r.nemesis.is_empty() {
        s.push_str(
            "<h2>Faults injected</h2><table><tr><th>at (s after start)</th><th>what</th></tr>",
        );
        for e in &r.nemesis {
            let _ = write!(
                s,
                "<tr><td>{:.2}</td><td>{}</td></tr>",
                e.at_secs,
                esc(&e.what)
            );
        }
        s.push_str("</table>");
    }
    if !r.recoveries.is_empty() {
        s.push_str("<h2>Time to recover</h2><table><tr><th>fault at (s)</th><th>healed at (s)</th><th>first refusal after the fault</th><th>first grant after the heal</th><th>claims granted during the fault</th><th>answered 503 or not at all during the fault</th></tr>");
        let secs = |t: Option<f64>| t.map_or_else(|| "—".to_owned(), |t| format!("{t:.2} s"));
        for rc in &r.recoveries {
            let _ = write!(
                s,
                "<tr><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                rc.fault_at_secs,
                rc.heal_at_secs,
                secs(rc.first_refusal_after_secs),
                secs(rc.recovered_after_secs),
                rc.granted_during,
                esc(&super::unavailable(rc))
            );
        }
        s.push_str("</table>");
    }
    invariants(&mut s, r);
    s.push_str("<h2>Claims over time</h2><p class=\"muted\">Distinct coupons granted by acknowledged claims, cumulative per second, against each template's stock (dashed). A line above its stock is an oversell.</p><div class=\"figure\">");
    s.push_str(&svg::claims_over_time(&r.claims_over_time));
    s.push_str("</div>");
    s.push_str("<h2>Per second</h2><p class=\"muted\">Requests and acknowledged claims completed in each second, and that second's p50/p99 latency; dashed lines mark injected faults.</p><div class=\"figure\">");
    let markers: Vec<(f64, String)> = r
        .nemesis
        .iter()
        .map(|e| {
            (
                e.at_secs,
                e.what.split(':').next().unwrap_or("fault").to_owned(),
            )
        })
        .collect();
    s.push_str(&timeline_svg::timeline(&r.timeline, &markers));
    s.push_str("</div>");
    open_model(&mut s, r);
    latency(&mut s, r);
    servers_and_runs(&mut s, r);
    statuses(&mut s, r);
    thresholds_and_baseline(&mut s, r);
    configuration(&mut s, r);
    s.push_str("</main></body></html>\n");
    s
}

fn summary_cards(s: &mut String, r: &Report) {
    let t = &r.throughput;
    let _ = write!(
        s,
        "<h2>Summary</h2><div class=\"cards\"><div class=\"card\"><b>{:.1}</b>requests/s</div><div class=\"card\"><b>{:.1}</b>claims/s</div><div class=\"card\"><b>{}</b>requests</div><div class=\"card\"><b>{}</b>coupons granted</div><div class=\"card\"><b>{:.1} s</b>duration</div><div class=\"card\"><b>{}</b>peak memory</div></div>",
        t.requests_per_sec,
        t.claims_per_sec,
        t.requests,
        t.claims_granted,
        t.duration_secs,
        r.peak_rss_mib
            .map_or("—".to_owned(), |m| format!("{m:.0} MiB"))
    );
}

fn invariants(s: &mut String, r: &Report) {
    s.push_str("<h2>Invariants</h2><table><tr><th></th><th>Invariant</th><th>Result</th><th>Checked</th><th>Violations</th></tr>");
    for i in &r.invariants {
        let _ = write!(
            s,
            "<tr><td><b>{}</b></td><td>{}<div class=\"muted\">{}</div></td><td class=\"{}\">{}</td><td><ul class=\"details\">",
            esc(&i.id),
            esc(&i.title),
            esc(&i.sources),
            if i.passed { "ok" } else { "bad" },
            if i.passed { "PASS" } else { "FAIL" }
        );
        for c in &i.checked {
            let _ = write!(s, "<li>{}</li>", esc(c));
        }
        s.push_str("</ul></td><td>");
        if i.details.is_empty() {
            s.push('—');
        } else {
            s.push_str("<ul class=\"details\">");
            for d in i.details.iter().take(SHOWN) {
                let _ = write!(s, "<li>{}</li>", esc(d));
            }
            if i.details.len() > SHOWN {
                let _ = write!(
                    s,
                    "<li>… {} more in report.json</li>",
                    i.details.len() - SHOWN
                );
            }
            s.push_str("</ul>");
        }
        s.push_str("</td></tr>");
    }
    s.push_str("</table>");
}

fn open_model(s: &mut String, r: &Report) {
    if let Some(open) = &r.open_model {
        let summary = esc(&open.summary()).replace("**", "");
        let _ = write!(
            s,
            "<h2>Open model: latency per arrival</h2><p class=\"muted\">{summary} One \
             arrival is one shopper's visit (its requests, retries included).</p>"
        );
        table(
            s,
            &crate::arrivals::OpenFigures::HEADER,
            open.rows().into_iter(),
            1,
        );
    }
}

fn latency(s: &mut String, r: &Report) {
    s.push_str("<h2>Latency per endpoint</h2><p class=\"muted\">Exact percentiles over every request the users sent (retries included), body read included; milliseconds.</p>");
    let header = [
        "endpoint",
        "requests",
        "2xx",
        "refused",
        "timeout/5xx",
        "p50",
        "p95",
        "p99",
        "max",
        "mean",
    ];
    let rows = r.endpoints.iter().map(|e| {
        let ms = [e.p50_ms, e.p95_ms, e.p99_ms, e.max_ms, e.mean_ms].map(|v| format!("{v:.2}"));
        let counts = [e.count, e.ok, e.refused, e.failed].map(|n| n.to_string());
        std::iter::once(e.name.clone())
            .chain(counts)
            .chain(ms)
            .collect()
    });
    table(s, &header, rows, 1);
    s.push_str("<div class=\"figure\">");
    s.push_str(&svg::latency_bars(&r.endpoints));
    s.push_str("</div>");
}

/// An HTML table of `rows` under `header`; columns from `numeric` on are right-aligned.
fn table(s: &mut String, header: &[&str], rows: impl Iterator<Item = Vec<String>>, numeric: usize) {
    s.push_str("<table><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for row in rows {
        s.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if i >= numeric { " class=\"num\"" } else { "" };
            let _ = write!(s, "<td{class}>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
}

fn servers_and_runs(s: &mut String, r: &Report) {
    if !r.audited {
        s.push_str("<p><b>Not audited</b> (<code>--no-audit</code>): this run only recorded what its shoppers saw (<code>acks.jsonl</code>); audit it with <code>coupon-loadtest audit</code>, merged with the other generators' runs.</p>");
    }
    for t in super::runs_and_servers(r) {
        let _ = write!(
            s,
            "<h2>{}</h2><p class=\"muted\">{}</p>",
            esc(t.title),
            esc(t.note)
        );
        table(s, t.header, t.rows.into_iter(), t.text_columns);
    }
}

fn statuses(s: &mut String, r: &Report) {
    s.push_str("<h2>Status codes</h2><div class=\"figure\">");
    s.push_str(&svg::outcome_bars(&r.endpoints));
    s.push_str("</div><table><tr><th>endpoint</th><th>status</th><th>code</th><th>count</th></tr>");
    for c in &r.status_codes {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&c.name),
            esc(&c.status),
            esc(c.code.as_deref().unwrap_or("—")),
            c.count
        );
    }
    s.push_str("</table>");
}

fn thresholds_and_baseline(s: &mut String, r: &Report) {
    if !r.thresholds.is_empty() {
        s.push_str("<h2>Goose thresholds</h2><table><tr><th>rule</th><th>observed</th><th>result</th></tr>");
        for t in &r.thresholds {
            let _ = write!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"{}\">{}</td></tr>",
                esc(&t.rule),
                esc(&t.observed),
                if t.passed { "ok" } else { "bad" },
                match (t.passed, t.aborted) {
                    (true, _) => "PASS",
                    (false, false) => "FAIL",
                    (false, true) => "FAIL (stopped the run)",
                }
            );
        }
        s.push_str("</table>");
    }
    if let Some(b) = &r.baseline {
        let _ = write!(
            s,
            "<h2>Baseline comparison</h2><p class=\"muted\">{} — throughput ≥ {:.0}% of baseline, latency ≤ {}× baseline (never below {} ms).</p>",
            esc(&b.file),
            b.tolerances.throughput * 100.0,
            b.tolerances.latency,
            b.tolerances.latency_floor_ms
        );
        if !b.regressions.is_empty() {
            s.push_str("<ul>");
            for reg in &b.regressions {
                let _ = write!(s, "<li class=\"bad\">{}</li>", esc(reg));
            }
            s.push_str("</ul>");
        }
        for n in &b.notes {
            let _ = write!(s, "<p class=\"muted\">note: {}</p>", esc(n));
        }
        s.push_str("<table><tr><th>metric</th><th>baseline</th><th>current</th><th>limit</th><th>result</th></tr>");
        for row in &b.rows {
            let _ = write!(
                s,
                "<tr><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{:.2}</td><td class=\"num\">{} {:.2}</td><td class=\"{}\">{}</td></tr>",
                esc(&row.metric),
                row.baseline,
                row.current,
                if row.bound == "min" { "≥" } else { "≤" },
                row.limit,
                if row.regressed { "bad" } else { "ok" },
                if row.regressed { "regressed" } else { "ok" }
            );
        }
        s.push_str("</table>");
    }
}

fn configuration(s: &mut String, r: &Report) {
    s.push_str("<h2>Templates</h2><table><tr><th>name</th><th>id</th><th>stock</th><th>per-user limit</th><th>refund policy</th><th>discount</th></tr>");
    for t in &r.templates {
        let _ = write!(
            s,
            "<tr><td>{}</td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&t.name),
            t.id,
            t.total_stock,
            t.per_user_limit,
            t.refund_policy.as_str(),
            t.discount.as_str()
        );
    }
    s.push_str("</table>");
    let _ = write!(
        s,
        "<h2>Configuration</h2><pre>{}</pre><p class=\"muted\">Started {} · finished {} · {} · Goose reports: {}</p>",
        esc(&serde_json::to_string_pretty(&r.config).unwrap_or_default()),
        esc(&r.started_at),
        esc(&r.finished_at),
        esc(&r.tool),
        if r.goose_reports.is_empty() {
            "none".to_owned()
        } else {
            r.goose_reports
                .iter()
                .map(|g| format!("<a href=\"{0}\">{0}</a>", esc(g)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
}
