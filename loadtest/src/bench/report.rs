//! The bench report: `report.json`, `report.md` and a self-contained `index.html` (inline
//! SVG bar chart of the ratios against their goals; no scripts, no network).

use std::{fmt::Write as _, path::Path};

use anyhow::Context;
use coupon_engine::service::{BATCH_BUCKETS, BatchHistogram};
use serde::{Deserialize, Serialize};

use super::{
    durability::PostgresDurability,
    measure::Row,
    ratios::Ratio,
    rounds::{self, ClaimGoals, Spread},
};
use crate::report::esc;

/// Everything one bench run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Document {
    pub started_at: String,
    /// `git rev-parse --short HEAD` (absent in older reports), for `coupon-loadtest trend`.
    #[serde(default)]
    pub git_commit: String,
    pub seconds: u64,
    /// Times every row was measured (`--rounds`); with more than one, `rows` and `ratios`
    /// are medians over the rounds.
    #[serde(default = "one")]
    pub rounds: usize,
    pub connections: usize,
    /// Tokio worker threads of the engine's server (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_threads: Option<usize>,
    pub pg_clients: usize,
    /// CPU count and model.
    pub machine: String,
    /// Whether the Postgres of the run flushed its commits (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresDurability>,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    /// Each ratio over the rounds (only with more than one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<Spread>,
    /// The rounds that met every claim-speed goal at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_goals: Option<ClaimGoals>,
    /// Every round's rows as measured (only with more than one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_rows: Vec<Vec<Row>>,
    /// Sync group-commit batch sizes seen during the sync rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_sizes: Option<BatchHistogramDoc>,
    pub baseline: Option<String>,
    pub failures: Vec<String>,
}

fn one() -> usize {
    1
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

/// "server on N worker threads · ", or nothing for a report that did not record it.
pub(crate) fn server_words(threads: Option<usize>) -> String {
    threads.map_or_else(String::new, |n| format!("{} · ", server_threads(n)))
}

/// "server on N Tokio worker threads" (one: a current-thread runtime): the header's words,
/// also the console's.
pub(crate) fn server_threads(n: usize) -> String {
    match n {
        1 => "server on 1 Tokio thread (current-thread runtime)".to_owned(),
        n => format!("server on {n} Tokio worker threads"),
    }
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
    chain_table(&mut s, &d.rows);
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
    if let Some(g) = &d.claim_goals {
        let _ = writeln!(s, "\n{}", claim_goals_line(g));
    }
    spread_table(&mut s, d);
    s
}

fn claim_goals_line(g: &ClaimGoals) -> String {
    let n = g.per_round.len();
    format!(
        "Claim-speed goals ({}) all met in one round: {} of {n} {}{}.",
        ClaimGoals::words(),
        g.met(),
        if n == 1 { "round" } else { "rounds" },
        if n > 1 {
            format!(
                " ({})",
                g.per_round
                    .iter()
                    .map(|m| if *m { "yes" } else { "no" })
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        }
    )
}

/// With several rounds: what the median ratios above were taken over.
fn spread_table(s: &mut String, d: &Document) {
    if d.spread.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nOver {} rounds (each measured its anchors, the engine rows, then its anchors \
         again; the values above are medians: of each row, and of each ratio over the \
         rounds):\n\n\
         | ratio | min | median | max | goal | rounds at goal | quiet rounds: median (n) | per round |\n\
         |---|---:|---:|---:|---:|---:|---:|---|",
        d.rounds
    );
    for r in &d.spread {
        let _ = writeln!(s, "| `{}` | {} |", r.key, spread_cells(r).join(" | "));
    }
    let _ = writeln!(s, "\n{}", steal_line(d));
}

/// Which rounds the hypervisor disturbed, and what "quiet" means in the table above.
fn steal_line(d: &Document) -> String {
    format!(
        "Steal, the most the hypervisor took of the cores over one row of each round: {}. \
         A round is quiet for a ratio when both its rows lost at most {}% to steal; the \
         quiet median stands beside the median of all rounds, not instead of it.",
        rounds::steal_per_round(&d.round_rows)
            .into_iter()
            .map(percent)
            .collect::<Vec<_>>()
            .join(", "),
        rounds::QUIET_STEAL_PCT
    )
}

/// min, median, max, goal, rounds at goal, quiet median (rounds), per round.
fn spread_cells(r: &Spread) -> [String; 7] {
    [
        num(r.min, 2),
        num(r.median, 2),
        num(r.max, 2),
        r.goal.map_or("—".into(), |g| format!("≥ {g}")),
        r.rounds_at_goal
            .map_or("—".into(), |n| format!("{n} of {}", r.per_round.len())),
        match r.quiet_median {
            Some(m) => format!("{} ({})", num(Some(m), 2), r.quiet_rounds),
            None => "— (0)".into(),
        },
        r.per_round
            .iter()
            .map(|v| num(*v, 2))
            .collect::<Vec<_>>()
            .join(", "),
    ]
}

/// A whole-percent figure, or "—" where it was not read.
pub(crate) fn percent(v: Option<f64>) -> String {
    v.map_or("—".to_owned(), |v| format!("{v:.0}%"))
}

/// Where each engine row's CPU went, per operation: the part to make cheaper is the
/// largest column, whatever else the machine was doing; and how busy the machine was (a
/// row far under 100% waited rather than ran out of CPU).
fn cpu_table(s: &mut String, rows: &[Row]) {
    let measured: Vec<_> = rows.iter().filter_map(|r| r.cpu.map(|c| (r, c))).collect();
    if measured.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nCPU per operation, µs (from /proc: the bench's server threads, its client threads, \
         every postgres and redis-server process; machine busy and steal: percent of all \
         cores over the row, from /proc/stat):\n\n\
         | row | server | client | postgres | redis | total | machine busy | steal |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (r, c) in measured {
        let _ = writeln!(
            s,
            "| `{}` | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} |",
            r.key,
            c.server_us,
            c.client_us,
            c.postgres_us,
            c.redis_us,
            c.total_us(),
            percent(c.machine_busy_pct),
            percent(c.steal_pct)
        );
    }
}

const CHAIN_WORDS: &str = "the template's batches run one after another on its counter \
     row: near 100% in a transaction, the row's claims waited for that chain (the rate is \
     the claims a batch over the time a batch takes), whatever the cores were doing";

/// The group commit over each sync row (see `chain.rs`).
fn chain_table(s: &mut String, rows: &[Row]) {
    let measured: Vec<_> = rows
        .iter()
        .filter_map(|r| r.group_commit.map(|c| (r, c)))
        .collect();
    if measured.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nGroup commit over each sync row ({CHAIN_WORDS}):\n\n\
         | row | batches | claims a batch | ms a batch transaction | in a transaction |\n\
         |---|---:|---:|---:|---:|"
    );
    for (r, c) in measured {
        let _ = writeln!(
            s,
            "| `{}` | {} | {:.1} | {:.2} | {:.0}% |",
            r.key, c.batches, c.claims_per_batch, c.batch_ms, c.in_transaction_pct
        );
    }
}

fn markdown(d: &Document) -> String {
    let mut s = format!(
        "# coupon-loadtest bench\n\n{} · {} s per row · {} · {} connections ({} for pgbench) · {}{}\n\n",
        d.started_at,
        d.seconds,
        rounds_words(d.rounds),
        d.connections,
        d.pg_clients,
        server_words(d.server_threads),
        d.machine
    );
    if let Some(p) = &d.postgres {
        let _ = writeln!(s, "{}\n", p.describe());
        if let Some(w) = p.warning() {
            let _ = writeln!(s, "**Warning:** {w}\n");
        }
    }
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
        "<h1>coupon-loadtest bench</h1><p class=\"muted\">{} · {} s per row · {} · {} connections \
         ({} for pgbench) · {}{}</p>",
        esc(&d.started_at),
        d.seconds,
        rounds_words(d.rounds),
        d.connections,
        d.pg_clients,
        server_words(d.server_threads),
        esc(&d.machine)
    );
    if let Some(p) = &d.postgres {
        let _ = write!(s, "<p class=\"muted\">{}</p>", esc(&p.describe()));
        if let Some(w) = p.warning() {
            let _ = write!(s, "<p><strong>Warning:</strong> {}</p>", esc(&w));
        }
    }
    s.push_str("<h2>Ratios</h2><p class=\"muted\">Bars: this run (with several rounds, the medians); black tick: the goal.</p>");
    s.push_str(&ratio_chart(&d.ratios));
    if let Some(g) = &d.claim_goals {
        let _ = write!(s, "<p>{}</p>", esc(&claim_goals_line(g)));
    }
    s.push_str(&spread_html(d));
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
    s.push_str(&chain_html(&d.rows));
    for f in &d.failures {
        let _ = write!(s, "<p><b>Below the baseline bound:</b> {}</p>", esc(f));
    }
    s.push_str("</body></html>\n");
    s
}

fn rounds_words(n: usize) -> String {
    if n == 1 {
        "1 round".into()
    } else {
        format!("{n} rounds (medians)")
    }
}

fn spread_html(d: &Document) -> String {
    if d.spread.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<p class=\"muted\">Bars: the median over {} rounds (each measured every row once, \
         its anchors before and after the engine rows).</p>\
         <table><tr><th>ratio</th><th>min</th><th>median</th><th>max</th><th>goal</th>\
         <th>rounds at goal</th><th>quiet rounds: median (n)</th><th>per round</th></tr>",
        d.rounds
    );
    for r in &d.spread {
        let _ = write!(s, "<tr><td><code>{}</code></td>", esc(&r.key));
        let [cells @ .., last] = spread_cells(r);
        for c in cells {
            let _ = write!(s, "<td class=n>{}</td>", esc(&c));
        }
        let _ = write!(s, "<td>{}</td></tr>", esc(&last));
    }
    s.push_str("</table>");
    let _ = write!(s, "<p class=\"muted\">{}</p>", esc(&steal_line(d)));
    s
}

/// The CPU-per-operation table (see `cpu.rs`), for the rows that measured it.
fn cpu_html(rows: &[Row]) -> String {
    let mut s = String::from(
        "<h2>Where the CPU goes</h2><p class=\"muted\">CPU µs per operation, from /proc: the \
         bench's server threads, its client threads (or the tool it ran), every postgres and \
         redis-server process; machine busy and steal: percent of all cores over the row, \
         from /proc/stat (a row far under 100% waited rather than ran out of CPU).</p>\
         <table><tr><th>row</th><th>server</th><th>client</th><th>postgres</th><th>redis</th>\
         <th>total</th><th>machine busy</th><th>steal</th></tr>",
    );
    for (r, c) in rows.iter().filter_map(|r| r.cpu.map(|c| (r, c))) {
        let _ = write!(
            s,
            "<tr><td><code>{}</code></td><td class=n>{:.0}</td><td class=n>{:.0}</td>\
             <td class=n>{:.0}</td><td class=n>{:.0}</td><td class=n>{:.0}</td>\
             <td class=n>{}</td><td class=n>{}</td></tr>",
            esc(&r.key),
            c.server_us,
            c.client_us,
            c.postgres_us,
            c.redis_us,
            c.total_us(),
            percent(c.machine_busy_pct),
            percent(c.steal_pct)
        );
    }
    s.push_str("</table>");
    s
}

/// The group-commit table (see `chain.rs`), for the sync rows.
fn chain_html(rows: &[Row]) -> String {
    let measured: Vec<_> = rows
        .iter()
        .filter_map(|r| r.group_commit.map(|c| (r, c)))
        .collect();
    if measured.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<h2>Group commit over each sync row</h2><p class=\"muted\">{}.</p>\
         <table><tr><th>row</th><th>batches</th><th>claims a batch</th>\
         <th>ms a batch transaction</th><th>in a transaction</th></tr>",
        esc(CHAIN_WORDS)
    );
    for (r, c) in measured {
        let _ = write!(
            s,
            "<tr><td><code>{}</code></td><td class=n>{}</td><td class=n>{:.1}</td>\
             <td class=n>{:.2}</td><td class=n>{:.0}%</td></tr>",
            esc(&r.key),
            c.batches,
            c.claims_per_batch,
            c.batch_ms,
            c.in_transaction_pct
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{chain::ChainLoad, rounds};

    fn ratio(value: f64) -> Ratio {
        Ratio {
            key: "http_sync/pgbench_insert".into(),
            numerator: "http_sync_granted".into(),
            denominator: "pgbench_insert".into(),
            value: Some(value),
            goal: Some(1.0),
            baseline: None,
            within_baseline: true,
        }
    }

    fn doc(round_ratios: &[Vec<Ratio>]) -> Document {
        let all = rounds::spread(round_ratios, &[]);
        let ratios = rounds::median_ratios(&round_ratios[0], &all);
        let spread = if round_ratios.len() > 1 {
            all
        } else {
            Vec::new()
        };
        Document {
            started_at: String::new(),
            git_commit: String::new(),
            seconds: 2,
            rounds: round_ratios.len(),
            connections: 50,
            server_threads: None,
            pg_clients: 16,
            machine: String::new(),
            postgres: None,
            rows: Vec::new(),
            ratios,
            spread,
            claim_goals: None,
            round_rows: Vec::new(),
            batch_sizes: None,
            baseline: None,
            failures: Vec::new(),
        }
    }

    #[test]
    fn the_header_says_whether_postgres_flushed_and_warns_when_it_did_not() {
        let with = |fsync: &str| Document {
            postgres: Some(PostgresDurability {
                fsync: fsync.into(),
                synchronous_commit: "on".into(),
                source: "a Postgres cluster the bench started".into(),
            }),
            ..doc(&[vec![ratio(1.1)]])
        };
        let flushed = with("on");
        let md = markdown(&flushed);
        assert!(!md.contains("worker thread"), "{md}");
        let one_worker = Document {
            server_threads: Some(1),
            ..flushed.clone()
        };
        assert!(
            markdown(&one_worker).contains("server on 1 Tokio thread (current-thread runtime) · ")
        );
        assert!(html(&one_worker).contains("server on 1 Tokio thread (current-thread runtime) · "));
        assert!(
            md.contains(
                "Postgres: fsync=on, synchronous_commit=on (a Postgres cluster the bench started)"
            ),
            "{md}"
        );
        assert!(!md.contains("Warning"), "{md}");
        let unflushed = with("off");
        assert!(
            markdown(&unflushed)
                .contains("**Warning:** Postgres does not wait for its WAL flush (fsync=off")
        );
        assert!(html(&unflushed).contains("<strong>Warning:</strong> Postgres does not wait"));
        assert!(!html(&flushed).contains("Warning"));
    }

    #[test]
    fn sync_rows_show_their_group_commit_and_other_rows_none() {
        let row = |key: &str, chain| Row {
            key: key.into(),
            what: "w".into(),
            per_sec: Some(1.0),
            p50_ms: None,
            p99_ms: None,
            note: String::new(),
            cpu: None,
            group_commit: chain,
        };
        let load = ChainLoad {
            batches: 3_092,
            claims_per_batch: 18.24,
            batch_ms: 1.504,
            in_transaction_pct: 93.2,
        };
        let d = Document {
            rows: vec![
                row("http_sync_granted", Some(load)),
                row("http_sold_out", None),
            ],
            ..doc(&[vec![ratio(1.1)]])
        };
        let md = markdown(&d);
        assert!(
            md.contains("| `http_sync_granted` | 3092 | 18.2 | 1.50 | 93% |"),
            "{md}"
        );
        let chain = md
            .split("Group commit over each sync row")
            .nth(1)
            .and_then(|t| t.split("\n\n").nth(1))
            .expect("a group-commit table");
        assert!(!chain.contains("http_sold_out"), "{chain}");
        assert!(
            html(&d).contains("<td class=n>18.2</td><td class=n>1.50</td><td class=n>93%</td>")
        );
        let none = doc(&[vec![ratio(1.1)]]);
        assert!(!markdown(&none).contains("Group commit over each sync row"));
        assert!(!html(&none).contains("Group commit over each sync row"));
    }

    #[test]
    fn several_rounds_lead_with_the_median_and_show_every_round() {
        let d = doc(&[vec![ratio(1.1)], vec![ratio(0.7)], vec![ratio(0.9)]]);
        let md = markdown(&d);
        assert!(
            md.contains("| `http_sync/pgbench_insert` | 0.90 ❌ |"),
            "{md}"
        );
        assert!(
            md.contains("| `http_sync/pgbench_insert` | 0.70 | 0.90 | 1.10 | ≥ 1 | 1 of 3 | — (0) | 1.10, 0.70, 0.90 |"),
            "{md}"
        );
        assert!(html(&d).contains("<td>1.10, 0.70, 0.90</td>"));
        assert!(
            md.contains(
                "Steal, the most the hypervisor took of the cores over one row of each round: "
            ),
            "{md}"
        );
        let with_goals = Document {
            claim_goals: Some(ClaimGoals {
                per_round: vec![true, false, false],
            }),
            ..d.clone()
        };
        let md = markdown(&with_goals);
        assert!(
            md.contains("all met in one round: 1 of 3 rounds (yes, no, no)."),
            "{md}"
        );
        assert!(md.contains("`http_sync_granted` p99 ≤ 25 ms"), "{md}");
        let one = markdown(&doc(&[vec![ratio(1.1)]]));
        assert!(!one.contains("rounds at goal"), "{one}");
        assert!(one.contains("1 round ·"), "{one}");
    }
}
