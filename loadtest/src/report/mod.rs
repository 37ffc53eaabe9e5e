//! The run's report: one document (the `report.json` schema, `schema_version` 1) rendered
//! four ways — `report.json`, `report.md` (CI job summaries), a self-contained `index.html`
//! (inline CSS and SVG, no scripts, no network) and `report.junit.xml` (CI test reporters)
//! — beside Goose's own reports.

mod assemble;
mod composed;
pub(crate) mod html;
mod json;
mod junit;
mod md;
pub(crate) mod svg;
mod timeline_svg;

use std::path::Path;

pub(crate) use assemble::Heading;

use anyhow::Context;
use coupon_engine::AuditReport;
use serde::{Deserialize, Serialize};

use crate::{
    attack::ThresholdRow,
    baseline::Comparison,
    checks::InvariantResult,
    run_outcome::RunOutcome,
    stats::{ClaimSeries, EndpointStats, StatusCount, Throughput},
    templates::TemplateInfo,
};

/// Version of the report schema (bumped on incompatible changes).
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Everything a run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Report {
    /// Schema version of this document.
    pub schema_version: u32,
    /// `coupon-loadtest <version>`.
    pub tool: String,
    /// `<UTC YYYYMMDDTHHMMSSZ>-<scenario>`: the report directory's name.
    pub run_id: String,
    /// Scenario name.
    pub scenario: String,
    /// `PASS` or `FAIL`.
    pub verdict: String,
    /// Why: `pass`, `invariant_violated` or `threshold_or_regression`.
    pub outcome: RunOutcome,
    /// The process exit code.
    pub exit_code: u8,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// When the report was written (RFC 3339, UTC).
    pub finished_at: String,
    /// `git rev-parse --short HEAD`, or `unknown`.
    pub git_commit: String,
    /// What was tested.
    pub target: String,
    /// The resolved configuration.
    pub config: serde_json::Value,
    /// The seeded templates.
    pub templates: Vec<TemplateInfo>,
    /// Request rates.
    pub throughput: Throughput,
    /// Latency and outcomes per request name (exact, from every answer).
    pub endpoints: Vec<EndpointStats>,
    /// Status codes (and error codes) per request name.
    pub status_codes: Vec<StatusCount>,
    /// Cumulative granted claims per second, per template.
    pub claims_over_time: Vec<ClaimSeries>,
    /// I1–I7.
    pub invariants: Vec<InvariantResult>,
    /// The auditor's report of each template.
    pub audits: Vec<AuditReport>,
    /// Goose thresholds and their results.
    pub thresholds: Vec<ThresholdRow>,
    /// The baseline comparison, with `--baseline`.
    pub baseline: Option<Comparison>,
    /// Goose's own report files in the same directory.
    pub goose_reports: Vec<String>,
    /// Peak resident memory of this process (the generator, and the in-process server when
    /// there is one) over the run, MiB; None where the OS does not say (non-Linux).
    #[serde(default)]
    pub peak_rss_mib: Option<f64>,
    /// Peak resident memory of each `coupon-server` process the run started (`--servers`),
    /// read just before they stop, MiB (None where unreadable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers_peak_rss_mib: Vec<Option<f64>>,
    /// Requests, granted claims and latency per second.
    #[serde(default)]
    pub timeline: Vec<crate::timeline::Second>,
    /// Each server's share of the requests (one row per server under test).
    #[serde(default)]
    pub servers: Vec<crate::shares::ServerShare>,
    /// Whether invariants were audited (`--no-audit` runs record only).
    #[serde(default = "audited_by_default")]
    pub audited: bool,
    /// A merged audit (`coupon-loadtest audit`): each run's own figures.
    #[serde(default)]
    pub runs: Vec<RunFigures>,
    /// Faults injected during the run (`--nemesis`), with when they happened.
    #[serde(default)]
    pub nemesis: Vec<crate::nemesis::NemesisEvent>,
    /// Per fault healed: time to the first refusal and to the first grant after the heal.
    #[serde(default)]
    pub recoveries: Vec<crate::recovery::Recovery>,
    /// After a sale that sold out: stock given back, claimed again on each server (I9).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restock: Vec<crate::scenarios::ServerRestock>,
    /// An open-model run's arrivals and latencies (`--arrival-rate`, `--arrival-profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_model: Option<crate::arrivals::OpenFigures>,
    /// Why the run failed, in words (empty on PASS).
    pub failures: Vec<String>,
    /// The failed invariants' counterexample page beside the report (`counterexample.html`),
    /// when the run kept the answers it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<String>,
    /// The invariants as composed checker results (valid / invalid / unknown each, and
    /// merged), the shape every verifier of the workspace reports; filled when written.
    #[serde(default)]
    pub checks: coupon_verify::Composed,
}

/// Reports written before `audited` existed were all audited.
fn audited_by_default() -> bool {
    true
}

/// One generator's own figures in a merged audit: its throughput and its latency (each
/// measured by its own clock, so they are kept apart).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunFigures {
    /// The run's id (its directory name).
    pub run_id: String,
    /// The servers it drove.
    pub servers: Vec<String>,
    /// Its request rates.
    pub throughput: Throughput,
    /// Its latency per request name.
    pub endpoints: Vec<EndpointStats>,
}

impl RunFigures {
    /// Header of the merged-runs table.
    pub(crate) const HEADER: [&'static str; 7] = [
        "run",
        "servers",
        "requests",
        "requests/s",
        "claims/s",
        "claim p50 ms",
        "claim p99 ms",
    ];

    /// Its row in the merged-runs table (unescaped text, in [`Self::HEADER`] order).
    pub(crate) fn cells(&self) -> Vec<String> {
        let claim = self.endpoints.iter().find(|e| e.name == "claim");
        let ms = |f: fn(&EndpointStats) -> f64| {
            claim.map_or("—".to_owned(), |e| format!("{:.2}", f(e)))
        };
        vec![
            self.run_id.clone(),
            self.servers.join(", "),
            self.throughput.requests.to_string(),
            format!("{:.1}", self.throughput.requests_per_sec),
            format!("{:.1}", self.throughput.claims_per_sec),
            ms(|e| e.p50_ms),
            ms(|e| e.p99_ms),
        ]
    }
}

/// A table both renderings show, in the same words.
pub(crate) struct Table {
    /// Its heading.
    pub title: &'static str,
    /// What it shows, in a sentence.
    pub note: &'static str,
    /// Its columns.
    pub header: &'static [&'static str],
    /// Its rows (unescaped text, in `header` order).
    pub rows: Vec<Vec<String>>,
    /// How many leading columns are text; the rest are figures.
    pub text_columns: usize,
}

/// The merged runs' own figures and the servers' shares, when the report has them.
pub(crate) fn runs_and_servers(r: &Report) -> Vec<Table> {
    let mut tables = Vec::new();
    if !r.runs.is_empty() {
        tables.push(Table {
            title: "Merged runs",
            note: "Each run's own figures, measured by its own clock; the report's \
                   throughput is their sum.",
            header: &RunFigures::HEADER,
            rows: r.runs.iter().map(RunFigures::cells).collect(),
            text_columns: 2,
        });
    }
    if !r.servers.is_empty() {
        tables.push(Table {
            title: "Servers",
            note: "Each server's share of the requests (they share Redis and Postgres; the \
                   audit covers all).",
            header: &crate::shares::ServerShare::HEADER,
            rows: r
                .servers
                .iter()
                .map(crate::shares::ServerShare::cells)
                .collect(),
            text_columns: 1,
        });
    }
    tables
}

/// The started servers' peak memory, in words ("212 MiB, 198 MiB"); None without any.
pub(crate) fn servers_peak_memory(r: &Report) -> Option<String> {
    if r.servers_peak_rss_mib.is_empty() {
        return None;
    }
    let peaks: Vec<String> = r
        .servers_peak_rss_mib
        .iter()
        .map(|m| m.map_or("—".to_owned(), |m| format!("{m:.0} MiB")))
        .collect();
    Some(peaks.join(", "))
}

/// Peak resident set size of this process so far (`VmHWM`), MiB.
pub(crate) fn peak_rss_mib() -> Option<f64> {
    crate::memory::peak_rss_mib_of("self")
}

/// Escapes text for HTML (and for SVG text).
/// A fault's unavailability for the tables: "12 of 340 (3.5%)", or "none sent".
fn unavailable(rc: &crate::recovery::Recovery) -> String {
    rc.unavailable_share().map_or_else(
        || "no claim sent".to_owned(),
        |share| {
            format!(
                "{} of {} ({:.1}%)",
                rc.unavailable_during,
                rc.sent_during,
                share * 100.0
            )
        },
    )
}

pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes `report.json`, `report.md`, `index.html` and `report.junit.xml` into `dir`.
pub(crate) fn write_all(dir: &Path, report: &Report) -> anyhow::Result<()> {
    let report = &Report {
        checks: composed::composed(report),
        ..report.clone()
    };
    let files = [
        ("report.json", json::render(report)?),
        ("report.md", md::render(report)),
        ("index.html", html::render(report)),
        ("report.junit.xml", junit::render(report)),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
