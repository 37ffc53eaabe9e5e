//! The bench report: `report.json`, `report.md` and a self-contained `index.html` (inline
//! SVG bar chart of the ratios against their goals; no scripts, no network).

use std::{fmt::Write as _, path::Path};

use anyhow::Context;
use coupon_engine::service::{BATCH_BUCKETS, BatchHistogram};
use serde::{Deserialize, Serialize};

use super::{measure::Row, ratios::Ratio};
use crate::report::esc;

/// Everything one bench run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Document {
    pub started_at: String,
    pub seconds: u64,
    pub connections: usize,
    pub pg_clients: usize,
    /// CPU count and model.
    pub machine: String,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    /// Sync group-commit batch sizes seen during the sync rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_sizes: Option<BatchHistogramDoc>,
    pub baseline: Option<String>,
    pub failures: Vec<String>,
}

/// A batch-size histogram as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BatchHistogramDoc {
    /// (upper bound, batches of at most that size, cumulative).
    pub buckets: Vec<(u64, u64)>,
    pub batches: u64,
    pub claims: u64,
    /// Mean time of one batch's transaction, ms.
    pub mean_batch_ms: f64,
}

impl From<BatchHistogram> for BatchHistogramDoc {
    fn from(h: BatchHistogram) -> Self {
        Self {
            buckets: BATCH_BUCKETS.iter().copied().zip(h.buckets).collect(),
            batches: h.count,
            claims: h.sum,
            mean_batch_ms: h.micros as f64 / 1000.0 / h.count.max(1) as f64,
        }
    }
}

/// `<n> cpus, <model>` from /proc/cpuinfo where there is one.
pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    format!("{cpus} cpus, {model}")
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".to_owned(), |v| format!("{v:.digits$}"))
}

/// The two tables (rows, ratios) as Markdown.
pub(crate) fn markdown_table(d: &Document) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| row | what | per second | p50 ms | p99 ms | how |\n|---|---|---:|---:|---:|---|"
    );
    for r in &d.rows {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            r.key,
            r.what,
            num(r.per_sec, 0),
            num(r.p50_ms, 2),
            num(r.p99_ms, 2),
            r.note
        );
    }
    cpu_table(&mut s, &d.rows);
    let _ = writeln!(
        s,
        "\n| ratio | value | goal | baseline |\n|---|---:|---:|---:|"
    );
    for r in &d.ratios {
        let mark = match (r.value, r.goal) {
            (Some(v), Some(g)) if v >= g => " ✅",
            (Some(_), Some(_)) => " ❌",
            _ => "",
        };
        let _ = writeln!(
            s,
            "| `{}` | {}{mark} | {} | {} |",
            r.key,
            num(r.value, 2),
            r.goal.map_or("—".into(), |g| format!("≥ {g}")),
            num(r.baseline, 2)
        );
    }
    s
}

/// Where each engine row's CPU went, per operation: the part to make cheaper is the
/// largest column, whatever else the machine was doing.
fn cpu_table(s: &mut String, rows: &[Row]) {
    let measured: Vec<_> = rows.iter().filter_map(|r| r.cpu.map(|c| (r, c))).collect();
    if measured.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nCPU per operation, µs (from /proc: the bench's server threads, its client threads, \
         every postgres and redis-server process):\n\n\
         | row | server | client | postgres | redis | total |\n|---|---:|---:|---:|---:|---:|"
    );
    for (r, c) in measured {
        let _ = writeln!(
            s,
            "| `{}` | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            r.key,
            c.server_us,
            c.client_us,
            c.postgres_us,
            c.redis_us,
            c.total_us()
        );
    }
}

fn markdown(d: &Document) -> String {
    let mut s = format!(
        "# coupon-loadtest bench\n\n{} · {} s per row · {} connections ({} for pgbench) · {}\n\n",
        d.started_at, d.seconds, d.connections, d.pg_clients, d.machine
    );
    s.push_str(&markdown_table(d));
    if let Some(b) = &d.batch_sizes {
        let _ = writeln!(
            s,
            "\nSync group commit: {} batches decided {} claims (mean {:.1} per batch, {:.2} ms \
             per batch transaction). Cumulative batch sizes: {}",
            b.batches,
            b.claims,
            b.claims as f64 / b.batches.max(1) as f64,
            b.mean_batch_ms,
            b.buckets
                .iter()
                .map(|(le, n)| format!("≤{le}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for f in &d.failures {
        let _ = writeln!(s, "\n**Below the baseline bound:** {f}");
    }
    s
}

fn html(d: &Document) -> String {
    let mut s = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>coupon-loadtest bench</title>\
         <style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}\
         td.n{text-align:right}.muted{color:#666}</style></head><body>",
    );
    let _ = write!(
        s,
        "<h1>coupon-loadtest bench</h1><p class=\"muted\">{} · {} s per row · {} connections \
         ({} for pgbench) · {}</p>",
        esc(&d.started_at),
        d.seconds,
        d.connections,
        d.pg_clients,
        esc(&d.machine)
    );
    s.push_str("<h2>Ratios</h2><p class=\"muted\">Bars: this run; black tick: the goal.</p>");
    s.push_str(&ratio_chart(&d.ratios));
    s.push_str("<h2>Rows</h2><table><tr><th>row</th><th>what</th><th>per second</th><th>p50 ms</th><th>p99 ms</th><th>how</th></tr>");
    for r in &d.rows {
        let _ = write!(
            s,
            "<tr><td><code>{}</code></td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>",
            esc(&r.key),
            esc(&r.what),
            num(r.per_sec, 0),
            num(r.p50_ms, 2),
            num(r.p99_ms, 2),
            esc(&r.note)
        );
    }
    s.push_str("</table>");
    s.push_str(&cpu_html(&d.rows));
    for f in &d.failures {
        let _ = write!(s, "<p><b>Below the baseline bound:</b> {}</p>", esc(f));
    }
    s.push_str("</body></html>\n");
    s
}

/// The CPU-per-operation table (see `cpu.rs`), for the rows that measured it.
fn cpu_html(rows: &[Row]) -> String {
    let mut s = String::from(
        "<h2>Where the CPU goes</h2><p class=\"muted\">CPU µs per operation, from /proc: the \
         bench's server threads, its client threads (or the tool it ran), every postgres and \
         redis-server process.</p><table><tr><th>row</th><th>server</th><th>client</th>\
         <th>postgres</th><th>redis</th><th>total</th></tr>",
    );
    for (r, c) in rows.iter().filter_map(|r| r.cpu.map(|c| (r, c))) {
        let _ = write!(
            s,
            "<tr><td><code>{}</code></td><td class=n>{:.0}</td><td class=n>{:.0}</td>\
             <td class=n>{:.0}</td><td class=n>{:.0}</td><td class=n>{:.0}</td></tr>",
            esc(&r.key),
            c.server_us,
            c.client_us,
            c.postgres_us,
            c.redis_us,
            c.total_us()
        );
    }
    s.push_str("</table>");
    s
}

/// Horizontal bars on a log scale (ratios span 0.1 to 20).
fn ratio_chart(ratios: &[Ratio]) -> String {
    let (w, row_h, left) = (760.0, 28.0, 230.0);
    let h = row_h * ratios.len() as f64 + 30.0;
    let x = |v: f64| left + (v.max(0.05).log10() + 1.5) / 3.0 * (w - left - 60.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-size=\"12\">"
    );
    for tick in [0.1, 0.5, 1.0, 2.0, 5.0, 10.0] {
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"0\" y2=\"{1:.1}\" stroke=\"#eee\"/>\
             <text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\" fill=\"#666\">{tick}×</text>",
            x(tick),
            h - 20.0,
            h - 5.0
        );
    }
    for (i, r) in ratios.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + 15.0,
            esc(&r.key)
        );
        if let Some(v) = r.value {
            let ok = r.goal.is_none_or(|g| v >= g);
            let _ = write!(
                s,
                "<rect x=\"{left}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"20\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\">{v:.2}</text>",
                (x(v) - left).max(1.0),
                if ok { "#4a8" } else { "#d64" },
                x(v) + 4.0,
                y + 15.0
            );
        }
        if let Some(g) = r.goal {
            let _ = write!(
                s,
                "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#000\" stroke-width=\"2\"/>",
                x(g),
                y - 2.0,
                y + 22.0
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Writes the three files into `dir`.
pub(crate) fn write(dir: &Path, d: &Document) -> anyhow::Result<()> {
    for (name, text) in [
        ("report.json", serde_json::to_string_pretty(d)? + "\n"),
        ("report.md", markdown(d)),
        ("index.html", html(d)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
