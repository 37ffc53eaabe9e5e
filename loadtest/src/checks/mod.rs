//! The post-run verdict on the invariants (docs/ARCHITECTURE.md, "Invariants"): the
//! auditor's report of every template (I1–I5, I12–I14, from live Redis + Postgres), the
//! servers' counts of stale admissions (I2, I3), and what the acknowledgement record implies
//! when compared with the users' coupons read back through the API (I1, I3–I7, I11), judged
//! by the verification core's checkers.
//!
//! Every client-side check is sound: it only flags what must hold whatever happened to the
//! requests whose outcome is unknown (timeouts, 5xx), which are allowed to have taken effect
//! or not.

mod admissions;
mod auditor;
mod client;
mod history;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use coupon_engine::{AuditReport, Coupon, Invariant};
use serde::{Deserialize, Serialize};

pub(crate) use client::LOCK_TTL_SECS;

use crate::{acks::Reply, admissions::RunAdmissions, templates::TemplateInfo};

/// The verdict on one invariant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct InvariantResult {
    /// `I1` … `I7`.
    pub id: String,
    /// What it means.
    pub title: String,
    /// Whether it held.
    pub passed: bool,
    /// Where the evidence comes from.
    pub sources: String,
    /// What was checked.
    pub checked: Vec<String>,
    /// Violations seen (at most [`MAX_DETAILS`], then a count of the rest).
    pub details: Vec<String>,
}

/// Violations listed per invariant at most.
pub(crate) const MAX_DETAILS: usize = 50;

/// What a run left for the checks. Its answers and wallets become the verification core's
/// [`coupon_verify::Evidence`] (`history.rs`); the audits and the servers' counts are judged
/// beside it.
pub(crate) struct RunRecord<'a> {
    /// The answers users saw that a check compares with anything, in completion order.
    pub events: &'a [Reply],
    /// Claims refused at their first attempt, not in `events` (see
    /// [`Reply::needed_by_checks`]).
    pub refusals_not_kept: u64,
    /// The run's templates.
    pub templates: &'a [TemplateInfo],
    /// The auditor's report of each template (same order as `templates`).
    pub audits: &'a [AuditReport],
    /// Every shopper's coupons after the run, by user id.
    pub wallets: &'a HashMap<String, Vec<Coupon>>,
    /// Sync claims the servers' Redis admitted and Postgres refused during the run (None:
    /// not read).
    pub stale_admissions: Option<RunAdmissions>,
}

/// The invariants the load test judges, and where the evidence of each comes from (their
/// titles are the engine's catalog's).
const SOURCES: [(Invariant, &str); 11] = [
    (Invariant::I1, "auditor + acknowledgements"),
    (Invariant::I2, "auditor + servers' /metrics"),
    (
        Invariant::I3,
        "auditor + acknowledgements + wallets + servers' /metrics",
    ),
    (Invariant::I4, "auditor + acknowledgements"),
    (Invariant::I5, "auditor + cross-user attempts"),
    (Invariant::I6, "acknowledgements + wallets"),
    (Invariant::I7, "acknowledgements"),
    (
        Invariant::I11,
        "acknowledgements (locks, redemptions, releases, refunds)",
    ),
    (Invariant::I12, "auditor (checkout locks)"),
    (Invariant::I13, "auditor (discounts)"),
    (Invariant::I14, "auditor (rebuilds per store change)"),
];

/// Collects findings per invariant.
#[derive(Default)]
struct Findings {
    details: BTreeMap<Invariant, Vec<String>>,
    checked: BTreeMap<Invariant, Vec<String>>,
}

impl Findings {
    fn flag(&mut self, id: Invariant, detail: String) {
        self.details.entry(id).or_default().push(detail);
    }

    fn checked(&mut self, id: Invariant, what: String) {
        self.checked.entry(id).or_default().push(what);
    }

    fn into_results(mut self) -> Vec<InvariantResult> {
        let mut results: Vec<InvariantResult> = SOURCES
            .iter()
            .map(|(id, sources)| self.result(*id, sources))
            .collect();
        // A finding of an invariant outside the list is still a failure, never dropped.
        let others: Vec<Invariant> = self.details.keys().copied().collect();
        results.extend(others.into_iter().map(|id| self.result(id, "auditor")));
        results
    }

    fn result(&mut self, id: Invariant, sources: &str) -> InvariantResult {
        let mut details = self.details.remove(&id).unwrap_or_default();
        if details.len() > MAX_DETAILS {
            let rest = details.len() - MAX_DETAILS;
            details.truncate(MAX_DETAILS);
            details.push(format!("… and {rest} more"));
        }
        InvariantResult {
            id: id.id().to_owned(),
            title: id.title().to_owned(),
            passed: details.is_empty(),
            sources: sources.to_owned(),
            checked: self.checked.remove(&id).unwrap_or_default(),
            details,
        }
    }
}

/// One line per violated invariant, for the report's "why it failed".
pub(crate) fn failures(invariants: &[InvariantResult]) -> Vec<String> {
    invariants
        .iter()
        .filter(|i| !i.passed)
        .map(|i| {
            format!(
                "{} violated ({} finding(s)): {}",
                i.id,
                i.details.len(),
                i.details.first().map(String::as_str).unwrap_or("")
            )
        })
        .collect()
}

/// Evaluates every invariant the load test judges.
pub(crate) fn evaluate(ev: &RunRecord<'_>) -> Vec<InvariantResult> {
    let mut f = Findings::default();
    auditor::check(ev, &mut f);
    admissions::check(ev, &mut f);
    client::check(ev, &mut f);
    f.into_results()
}
