//! The checkers a case is judged by, composed as Jepsen's `checker/compose` does
//! (`coupon_verify::validity`): each looks at the same evidence and says valid, invalid (with
//! its findings) or unknown, so adding a checker is adding a line; a checker that errs, or a
//! linearizability search that spends its budget, is unknown — never a pass, never a
//! violation it did not find.

use coupon_engine::{AuditReport, Finding, Invariant, StaleAdmissions};
use coupon_verify::{
    limits::check_held_limits,
    liveness::check_liveness,
    one_order::check_single_use,
    owners::check_owners,
    validity::{CheckerResult, Composed, Judgement},
};

use crate::{
    ack::{FinalState, check_acks},
    history::History,
    linearizability::Verdict,
    one_order::check_one_live_order,
    scenario::Scenario,
    scenario::{CASE_DEADLINE, LIVENESS_MARGIN},
};

/// What a finished case left for the checkers.
pub struct Evidence<'a> {
    /// The case.
    pub scenario: &'a Scenario,
    /// What every process invoked and saw.
    pub history: &'a History,
    /// Every coupon at quiescence.
    pub final_state: &'a FinalState,
    /// The auditor's report of each template (scenario order).
    pub audits: &'a [AuditReport],
    /// The linearizability checker's verdict on the history.
    pub verdict: &'a Verdict,
    /// The errors behind `unknown` outcomes.
    pub errors: &'a [String],
    /// Sync claims Redis admitted and Postgres refused, over the whole case.
    pub stale_admissions: StaleAdmissions,
}

/// A checker: what it concludes on a case (an `Err` makes it unknown, not a finding).
pub type Checker = fn(&Evidence<'_>) -> anyhow::Result<Judgement>;

/// Every checker, in report order: the auditor (I1–I5, I12, I13), Redis's admissions (I2,
/// I3 while the case ran), the acknowledgements (I6, I7), the final holdings, single use
/// and owners (I3, I4, I5: the core's client-side checkers the load test uses too), one
/// live order per coupon (I11), linearizability (I8), liveness (I9).
pub const CHECKERS: [(&str, Checker); 7] = [
    ("auditor", auditor),
    ("admissions", admissions),
    ("acknowledgements", acknowledgements),
    ("holdings, single use, owners", holdings_and_owners),
    ("one live order", one_live_order),
    ("linearizability", linearizability),
    ("liveness", liveness),
];

/// Every checker's result, merged.
pub fn check_all(evidence: &Evidence<'_>) -> Composed {
    Composed::of(
        CHECKERS
            .iter()
            .map(|(name, checker)| CheckerResult::judge(name, checker(evidence)))
            .collect(),
    )
}

/// The auditor's violations of each template, from the live stores.
fn auditor(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    Ok(Judgement::Decided(
        ev.audits
            .iter()
            .enumerate()
            .flat_map(|(i, audit)| {
                audit
                    .violations
                    .iter()
                    .map(move |v| Finding::new(v.invariant, format!("template {i}: {}", v.detail)))
            })
            .collect(),
    ))
}

/// The auditor sees I2 and I3 at quiescence; this is their live side. A Redis whose counters
/// are behind Postgres admits claims Postgres then refuses (sync mode counts them). After a
/// restart or a promotion Redis must be checked and rebuilt before it admits
/// (docs/ARCHITECTURE.md, "A Redis that lies"), so any such refusal is a finding, unless a
/// fault of the case leaves stale counters with no sign to act on (an eviction, a server
/// given the scripts beforehand), which Postgres alone answers for.
fn admissions(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    if ev
        .scenario
        .faults
        .iter()
        .any(|f| f.fault.stales_redis_without_a_sign())
    {
        return Ok(Vec::new().into());
    }
    Ok(ev.stale_admissions.findings().into())
}

/// What clients were told against the final state.
fn acknowledgements(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    Ok(check_acks(ev.history, ev.final_state)?.into())
}

/// No user holding more than the limit at the end, no coupon acknowledged as redeemed by two
/// orders at once, nobody acknowledged acting on another user's coupon.
fn holdings_and_owners(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    let ops = ev.history.operations()?;
    let mut found = check_held_limits(ev.final_state, &ev.scenario.templates);
    found.extend(check_single_use(&ops));
    found.extend(check_owners(&ops, ev.final_state));
    Ok(found.into())
}

/// Orders acknowledged as holding one coupon at once.
fn one_live_order(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    // The cases' locks outlast every case: none lapses.
    Ok(check_one_live_order(&ev.history.operations()?, None).into())
}

/// The history against the sequential model, per template.
fn linearizability(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    Ok(match ev.verdict {
        Verdict::Linearizable => Vec::new().into(),
        // When Redis loses a template's state, a claim in flight at that moment has reserved
        // stock, quota and its request id, which others may have observed as refusals, and
        // is then fenced (it fails, unacknowledged). No sequential order explains a refusal
        // caused by a reservation that never takes effect: Redis trades the durability of
        // unacknowledged reservations for speed. Such cases are held to I1–I7 and I9; the
        // verdict stays in the report.
        Verdict::NotLinearizable { .. } if ev.scenario.loses_redis_state() => Vec::new().into(),
        Verdict::NotLinearizable { explanation, .. } => {
            vec![Finding::new(Invariant::I8, explanation.clone())].into()
        }
        Verdict::Undecided { reason, .. } => Judgement::Undecided(reason.clone()),
    })
}

/// Liveness, in every case, faults or not: every operation is answered within the
/// engine's deadline plus a margin (an `unavailable` answer counts: a store may be
/// unreachable). Without faults, or with only faults no store goes away in (a slot
/// migrating), moreover, every operation gets a definite answer.
fn liveness(ev: &Evidence<'_>) -> anyhow::Result<Judgement> {
    let definite = ev.scenario.faults.iter().all(|f| f.fault.served_through());
    Ok(check_liveness(
        ev.history,
        CASE_DEADLINE + LIVENESS_MARGIN,
        definite,
        ev.errors,
    )
    .into())
}
