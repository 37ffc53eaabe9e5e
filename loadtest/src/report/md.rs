//! `report.md`: the report as Markdown, for CI job summaries (`$GITHUB_STEP_SUMMARY`).

use std::fmt::Write;

use super::Report;

/// Violations shown per failed invariant.
const SHOWN: usize = 10;

/// Pipes would break a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table of `rows` under `header`.
fn table(s: &mut String, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let _ = writeln!(
        s,
        "| {} |\n|{}",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for row in rows {
        let row: Vec<String> = row.iter().map(|c| cell(c)).collect();
        let _ = writeln!(s, "| {} |", row.join(" | "));
    }
}

/// The Markdown text of `r`.
pub(crate) fn render(r: &Report) -> String {
    let mut s = String::new();
    header(&mut s, r);
    faults_and_invariants(&mut s, r);
    throughput(&mut s, r);
    open_model(&mut s, r);
    latency_and_statuses(&mut s, r);
    thresholds(&mut s, r);
    baseline(&mut s, r);
    configuration(&mut s, r);
    s
}

/// Title, run line, and why the run failed.
fn header(s: &mut String, r: &Report) {
    let mark = if r.exit_code == 0 { "✅" } else { "❌" };
    let _ = writeln!(
        s,
        "# {mark} coupon-loadtest `{}`: {} (exit {})\n",
        r.scenario, r.verdict, r.exit_code
    );
    let _ = writeln!(
        s,
        "Run `{}` · commit `{}` · {} · {}\n",
        r.run_id, r.git_commit, r.target, r.started_at
    );
    let _ = writeln!(s, "Checks: {}\n", super::composed::summary(&r.checks));
    if !r.audited {
        let _ = writeln!(
            s,
            "**Not audited** (`--no-audit`): this run only recorded what its shoppers saw \
             (`acks.jsonl`); audit it with `coupon-loadtest audit` (merged with the other \
             generators' runs).\n"
        );
    }
    if !r.failures.is_empty() {
        let _ = writeln!(s, "**Why it failed**\n");
        for f in &r.failures {
            let _ = writeln!(s, "- {}", cell(f));
        }
        if let Some(page) = &r.counterexample {
            let _ = writeln!(
                s,
                "\nThe answers the failures name, on a timeline: [{page}]({page})"
            );
        }
        s.push('\n');
    }
}

/// The faults injected and the invariant table, with the evidence of each violation.
fn faults_and_invariants(s: &mut String, r: &Report) {
    if !r.nemesis.is_empty() {
        let _ = writeln!(
            s,
            "## Faults injected\n\n| at (s after start) | what |\n|---|---|"
        );
        for e in &r.nemesis {
            let _ = writeln!(s, "| {:.2} | {} |", e.at_secs, cell(&e.what));
        }
        s.push('\n');
    }
    if !r.restock.is_empty() {
        let _ = writeln!(
            s,
            "## Stock given back after the sale sold out\n\n| server | claims sent | granted after (s) |\n|---|---|---|"
        );
        for p in &r.restock {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                p.server,
                p.claims,
                secs(p.granted_after_secs)
            );
        }
        s.push('\n');
    }
    if !r.recoveries.is_empty() {
        let _ = writeln!(
            s,
            "## Time to recover\n\n| fault at (s) | healed at (s) | first refusal after the fault | first grant after the heal | claims granted during the fault | answered 503 or not at all during the fault |\n|---|---|---|---|---|---|"
        );
        for rc in &r.recoveries {
            let _ = writeln!(
                s,
                "| {:.2} | {:.2} | {} | {} | {} | {} |",
                rc.fault_at_secs,
                rc.heal_at_secs,
                secs(rc.first_refusal_after_secs),
                secs(rc.recovered_after_secs),
                rc.granted_during,
                super::unavailable(rc)
            );
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "## Invariants\n\n| | Invariant | Result | Evidence |\n|---|---|---|---|"
    );
    for i in &r.invariants {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            i.id,
            cell(&i.title),
            if i.passed { "✅ pass" } else { "❌ **FAIL**" },
            cell(&i.sources)
        );
    }
    for i in r.invariants.iter().filter(|i| !i.passed) {
        let _ = writeln!(s, "\n### {} violated\n", i.id);
        for d in i.details.iter().take(SHOWN) {
            let _ = writeln!(s, "- {}", cell(d));
        }
        if i.details.len() > SHOWN {
            let _ = writeln!(s, "- … {} more in report.json", i.details.len() - SHOWN);
        }
    }
}

/// Throughput, then the per-run and per-server shares when there are several.
fn throughput(s: &mut String, r: &Report) {
    let t = &r.throughput;
    let _ = writeln!(
        s,
        "\n## Throughput\n\n| duration | requests | requests/s | claims | claims/s | coupons granted | peak memory |\n|---|---|---|---|---|---|---|\n| {:.1} s | {} | {:.1} | {} | {:.1} | {} | {} |",
        t.duration_secs,
        t.requests,
        t.requests_per_sec,
        t.claims,
        t.claims_per_sec,
        t.claims_granted,
        r.peak_rss_mib
            .map_or("—".to_owned(), |m| format!("{m:.0} MiB"))
    );
    if let Some(peaks) = super::servers_peak_memory(r) {
        let _ = writeln!(s, "\nServers' peak memory: {peaks}.");
    }
    for t in super::runs_and_servers(r) {
        let _ = write!(s, "\n## {}\n\n{}\n\n", t.title, t.note);
        table(s, t.header, t.rows.into_iter());
    }
}

/// Exact latency percentiles and status counts per endpoint.
fn open_model(s: &mut String, r: &Report) {
    if let Some(open) = &r.open_model {
        let _ = writeln!(
            s,
            "\n## Open model: latency per arrival (one shopper's visit)\n\n{}\n",
            open.summary()
        );
        table(
            s,
            &crate::arrivals::OpenFigures::HEADER,
            open.rows().into_iter(),
        );
    }
}

fn latency_and_statuses(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "\n## Latency per endpoint (ms, exact)\n\n| endpoint | requests | 2xx | refused | timeout/5xx | p50 | p95 | p99 | max |\n|---|---|---|---|---|---|---|---|---|"
    );
    for e in &r.endpoints {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            e.name, e.count, e.ok, e.refused, e.failed, e.p50_ms, e.p95_ms, e.p99_ms, e.max_ms
        );
    }
    let _ = writeln!(
        s,
        "\n## Status codes\n\n| endpoint | status | code | count |\n|---|---|---|---|"
    );
    for c in &r.status_codes {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            c.name,
            c.status,
            c.code.as_deref().unwrap_or("—"),
            c.count
        );
    }
}

/// Goose's own threshold rules, when the run set any.
fn thresholds(s: &mut String, r: &Report) {
    if !r.thresholds.is_empty() {
        let _ = writeln!(
            s,
            "\n## Goose thresholds\n\n| rule | observed | result |\n|---|---|---|"
        );
        for th in &r.thresholds {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} |",
                cell(&th.rule),
                cell(&th.observed),
                match (th.passed, th.aborted) {
                    (true, _) => "✅ pass",
                    (false, false) => "❌ FAIL",
                    (false, true) => "❌ FAIL (stopped the run)",
                }
            );
        }
    }
}

/// The comparison with a committed baseline, when one was given.
fn baseline(s: &mut String, r: &Report) {
    if let Some(b) = &r.baseline {
        let _ = writeln!(
            s,
            "\n## Baseline `{}`\n\nTolerances: throughput ≥ {:.0}% of baseline, latency ≤ {}× baseline (floor {} ms).\n",
            b.file,
            b.tolerances.throughput * 100.0,
            b.tolerances.latency,
            b.tolerances.latency_floor_ms
        );
        if b.regressions.is_empty() {
            let _ = writeln!(s, "No regression.\n");
        } else {
            for reg in &b.regressions {
                let _ = writeln!(s, "- ❌ {}", cell(reg));
            }
            s.push('\n');
        }
        for n in &b.notes {
            let _ = writeln!(s, "- note: {}", cell(n));
        }
        let _ = writeln!(
            s,
            "\n| metric | baseline | current | limit | result |\n|---|---|---|---|---|"
        );
        for row in &b.rows {
            let _ = writeln!(
                s,
                "| {} | {:.2} | {:.2} | {} {:.2} | {} |",
                row.metric,
                row.baseline,
                row.current,
                if row.bound == "min" { "≥" } else { "≤" },
                row.limit,
                if row.regressed { "❌ regressed" } else { "ok" }
            );
        }
    }
}

/// The run's configuration, folded.
fn configuration(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "\n<details><summary>Configuration</summary>\n\n```json\n{}\n```\n</details>",
        serde_json::to_string_pretty(&r.config).unwrap_or_default()
    );
}

/// Seconds with two decimals, or a dash for none.
fn secs(t: Option<f64>) -> String {
    t.map_or_else(|| "—".to_owned(), |t| format!("{t:.2} s"))
}
