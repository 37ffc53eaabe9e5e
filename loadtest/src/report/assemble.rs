//! The parts of a report every producer fills the same way — identity, verdict, clock, and
//! the figures drawn from the answers' tally — so a run and a merged audit differ only in
//! what they add (thresholds, baseline, merged runs, faults).

use std::path::Path;

use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use super::{Report, SCHEMA_VERSION};
use crate::{
    checks::InvariantResult, run_outcome::RunOutcome, shares, stats, tally::Tally,
    templates::TemplateInfo, timeline,
};

/// What names a report: where it is written, what ran, against what, and how.
pub(crate) struct Heading<'a> {
    /// The report's directory (its name is the report's id).
    pub dir: &'a Path,
    /// The scenario (or scenarios, for a merged audit).
    pub scenario: String,
    /// When the run started.
    pub started_at: OffsetDateTime,
    /// What was attacked, in words.
    pub target: String,
    /// The configuration, as given.
    pub config: serde_json::Value,
}

impl Report {
    /// A report of `verdict` on `invariants`, with every figure the tally gives; the rest
    /// (audits, thresholds, baseline, merged runs, faults, extra failures) starts empty.
    pub(crate) fn assemble(
        heading: Heading<'_>,
        verdict: RunOutcome,
        invariants: Vec<InvariantResult>,
        tally: &Tally,
        templates: Vec<TemplateInfo>,
        servers: &[String],
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            tool: format!("coupon-loadtest {}", env!("CARGO_PKG_VERSION")),
            run_id: crate::report_dir::run_id(heading.dir),
            scenario: heading.scenario,
            verdict: verdict.label().to_owned(),
            outcome: verdict,
            exit_code: verdict.exit_code(),
            started_at: heading.started_at.format(&Rfc3339).unwrap_or_default(),
            finished_at: OffsetDateTime::now_utc()
                .format(&Rfc3339)
                .unwrap_or_default(),
            git_commit: crate::report_dir::git_commit(),
            target: heading.target,
            config: heading.config,
            claims_over_time: stats::claims_over_time(tally, &templates),
            templates,
            throughput: stats::throughput(tally),
            endpoints: stats::endpoints(tally),
            status_codes: stats::status_codes(tally),
            failures: crate::checks::failures(&invariants),
            counterexample: None,
            invariants,
            audits: Vec::new(),
            thresholds: Vec::new(),
            baseline: None,
            goose_reports: Vec::new(),
            timeline: timeline::timeline(tally),
            peak_rss_mib: None,
            servers_peak_rss_mib: Vec::new(),
            servers: shares::shares(tally, servers),
            audited: true,
            runs: Vec::new(),
            nemesis: Vec::new(),
            recoveries: Vec::new(),
            restock: Vec::new(),
            open_model: None,
            checks: coupon_verify::Composed::default(),
        }
    }
}
