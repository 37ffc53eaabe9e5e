//! The checkers a case is judged by, composed as Jepsen's `checker/compose` does
//! (`coupon_verify::validity`): each looks at the same evidence and says valid, invalid (with
//! its findings) or unknown, so adding a checker is adding a line; a checker that errs, or a
//! linearizability search that spends its budget, is unknown — never a pass, never a
//! violation it did not find.

use coupon_engine::{AuditReport, Finding, Invariant, StaleAdmissions};
use coupon_verify::{
    Evidence, HISTORY_CHECKERS,
    liveness::check_liveness,
    retries::RedisCounters,
    validity::{CheckerResult, Composed, Judgement},
};

use crate::{
    ack::FinalState,
    history::History,
    linearizability::Verdict,
    scenario::Scenario,
    scenario::{CASE_DEADLINE, LIVENESS_MARGIN},
};

/// What a finished case left for the checkers. Its history and final state are the
/// verification core's [`Evidence`], judged by the same checkers as a load run's; the rest
/// is what only a case can see.
pub struct CaseRecord<'a> {
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
pub type Checker = fn(&CaseRecord<'_>) -> anyhow::Result<Judgement>;

/// The checkers only a case has, in report order: the auditor (I1–I5, I12, I13), Redis's
/// admissions (I2, I3 while the case ran), linearizability (I8), liveness (I9). The
/// history checkers every generator shares ([`HISTORY_CHECKERS`]: I1, I3–I7, I11) follow
/// them in the report.
pub const CASE_CHECKERS: [(&str, Checker); 4] = [
    ("auditor", auditor),
    ("admissions", admissions),
    ("linearizability", linearizability),
    ("liveness", liveness),
];

/// Every checker's result, merged.
pub fn check_all(case: &CaseRecord<'_>) -> Composed {
    let mut results: Vec<CheckerResult> = CASE_CHECKERS
        .iter()
        .map(|(name, checker)| CheckerResult::judge(name, checker(case)))
        .collect();
    let operations = case.history.operations().map_err(|e| e.to_string());
    let redis_counters = if case
        .scenario
        .faults
        .iter()
        .any(|f| f.fault.stales_redis_without_a_sign())
    {
        RedisCounters::MayBeStaleUnsigned
    } else {
        RedisCounters::LossesSigned
    };
    results.extend(HISTORY_CHECKERS.iter().map(|(name, check)| {
        let judged = operations.as_deref().map(|operations| {
            check(&Evidence {
                operations,
                final_state: case.final_state,
                templates: &case.scenario.templates,
                // The cases' locks outlast every case: none lapses.
                lock_lapse: None,
                redis_counters,
            })
            .into()
        });
        CheckerResult::judge(name, judged.map_err(String::as_str))
    }));
    Composed::of(results)
}

/// The auditor's violations of each template, from the live stores.
fn auditor(ev: &CaseRecord<'_>) -> anyhow::Result<Judgement> {
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
fn admissions(ev: &CaseRecord<'_>) -> anyhow::Result<Judgement> {
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

/// The history against the sequential model, per template.
fn linearizability(ev: &CaseRecord<'_>) -> anyhow::Result<Judgement> {
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
fn liveness(ev: &CaseRecord<'_>) -> anyhow::Result<Judgement> {
    let definite = ev.scenario.faults.iter().all(|f| f.fault.served_through());
    Ok(check_liveness(
        ev.history,
        CASE_DEADLINE + LIVENESS_MARGIN,
        definite,
        ev.errors,
    )
    .into())
}
