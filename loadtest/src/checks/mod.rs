//! The post-run verdict on invariants I1–I7 (docs/ARCHITECTURE.md, "Invariants"): the
//! auditor's report of every template (I1–I5, from live Redis + Postgres), and what the
//! acknowledgement record implies when compared with the users' coupons read back through
//! the API (I1, I3, I4, I5, I6, I7).
//!
//! Every client-side check is sound: it only flags what must hold whatever happened to the
//! requests whose outcome is unknown (timeouts, 5xx), which are allowed to have taken effect
//! or not.

mod admissions;
mod auditor;
mod claims;
mod limits;
mod lost_acks;
mod one_order;
mod redemptions;
#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use coupon_engine::{AuditReport, Coupon, Invariant, RefundPolicy};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub(crate) use one_order::LOCK_TTL_SECS;

use crate::{
    acks::{Event, Op, Outcome},
    admissions::RunAdmissions,
    templates::TemplateInfo,
};

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

/// What the checks look at.
pub(crate) struct Evidence<'a> {
    /// The answers users saw that a check compares with anything, in completion order.
    pub events: &'a [Event],
    /// Claims refused at their first attempt, not in `events` (see
    /// [`Event::needed_by_checks`]).
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

/// One claim as the client knows it: every attempt with one idempotency key.
struct ClaimKey<'a> {
    template: Uuid,
    user: Arc<str>,
    request_id: Arc<str>,
    attempts: Vec<&'a Event>,
}

/// The kept answers, grouped the ways the checks read them.
struct Answers<'a> {
    /// The run's templates by id.
    templates: HashMap<Uuid, &'a TemplateInfo>,
    /// Templates with nothing in flight after the run (pending and outbox drained).
    drained: HashSet<Uuid>,
    /// Claims, grouped by idempotency key, in order.
    keys: BTreeMap<(Uuid, Arc<str>, Arc<str>), ClaimKey<'a>>,
    /// Redeems, refunds, locks and releases of each coupon by its owner (or the order
    /// service on the owner's behalf).
    owner_ops: HashMap<Uuid, Vec<&'a Event>>,
    /// Redeems and refunds of each coupon by others.
    cross_ops: HashMap<Uuid, Vec<&'a Event>>,
}

impl<'a> Answers<'a> {
    fn of(ev: &Evidence<'a>) -> Self {
        let templates = ev.templates.iter().map(|t| (t.id, t)).collect();
        let drained = ev
            .audits
            .iter()
            .filter(|a| a.pending == 0 && a.outbox_unapplied == 0)
            .map(|a| a.template_id.as_uuid())
            .collect();
        let mut keys: BTreeMap<(Uuid, Arc<str>, Arc<str>), ClaimKey<'a>> = BTreeMap::new();
        for e in ev.events.iter().filter(|e| e.op == Op::Claim) {
            if let (Some(t), Some(r)) = (e.template, e.request_id.clone()) {
                keys.entry((t, e.user.clone(), r.clone()))
                    .or_insert_with(|| ClaimKey {
                        template: t,
                        user: e.user.clone(),
                        request_id: r,
                        attempts: Vec::new(),
                    })
                    .attempts
                    .push(e);
            }
        }
        let mut owner_ops: HashMap<Uuid, Vec<&Event>> = HashMap::new();
        let mut cross_ops: HashMap<Uuid, Vec<&Event>> = HashMap::new();
        for e in ev.events {
            if let Some(c) = e.coupon {
                match e.op {
                    Op::Redeem | Op::Refund | Op::Lock | Op::Release => {
                        owner_ops.entry(c).or_default().push(e)
                    }
                    Op::RedeemCrossUser | Op::RefundCrossUser | Op::LockCrossUser => {
                        cross_ops.entry(c).or_default().push(e)
                    }
                    Op::Claim | Op::MyCoupons => {}
                }
            }
        }
        Self {
            templates,
            drained,
            keys,
            owner_ops,
            cross_ops,
        }
    }

    /// Whether a refund of `c` may have happened (sent by its owner, or by another user
    /// and not certainly refused).
    fn refund_attempted(&self, c: &Uuid) -> bool {
        self.owner_ops
            .get(c)
            .is_some_and(|es| es.iter().any(|e| e.op == Op::Refund))
            || self.cross_ops.get(c).is_some_and(|es| {
                es.iter().any(|e| {
                    e.op == Op::RefundCrossUser
                        && matches!(e.outcome(), Outcome::Ok | Outcome::Unknown)
                })
            })
    }

    /// Whether coupon `c` of `t` certainly still counts against stock and the limit:
    /// acknowledged, and never possibly refunded to stock.
    fn still_counting(&self, c: &Uuid, t: &TemplateInfo) -> bool {
        t.refund_policy == RefundPolicy::ReturnToUser || !self.refund_attempted(c)
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

/// Evaluates I1–I7.
pub(crate) fn evaluate(ev: &Evidence<'_>) -> Vec<InvariantResult> {
    let mut f = Findings::default();
    auditor::check(ev, &mut f);
    admissions::check(ev, &mut f);
    let answers = Answers::of(ev);
    let granted = claims::idempotency(&answers.keys, ev.refusals_not_kept, &mut f);
    limits::stock(ev, &answers, &granted, &mut f);
    limits::per_user(ev, &answers, &granted, &mut f);
    redemptions::single_use(&answers, &mut f);
    one_order::one_live_order(&answers, &mut f);
    redemptions::cross_user(&answers, &mut f);
    lost_acks::check(ev, &answers, &granted, &mut f);
    f.into_results()
}
