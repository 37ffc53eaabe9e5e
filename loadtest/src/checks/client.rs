//! What the shoppers were told, judged by the verification core: the run's answers and the
//! coupons read back become the core's history and final state ([`super::history`]), and the
//! core's checkers decide I1, I3–I7 and I11. This module only says what was looked at.

use std::collections::{BTreeSet, HashSet};

use coupon_engine::Invariant;
use coupon_verify::{
    grants::Grants,
    history::Outcome as Ended,
    one_order::LockLapse,
    op::Op as CoreOp,
    retries::{RedisCounters, check_answered_ids},
};

use super::{Findings, RunRecord, history::RunHistory};

/// Seconds a checkout lock the run's orders take holds (`scenarios/checkout.rs` asks for
/// it): short, so that abandoned orders lapse within a run. The checks must know when a
/// lock lapsed.
pub(crate) const LOCK_TTL_SECS: u64 = 2;

/// Slack for the server's clock against the load generator's (one machine, two clocks).
const CLOCK_SLACK_US: u64 = 500_000;

/// Every client-side invariant, from the core's checkers.
pub(super) fn check(ev: &RunRecord<'_>, f: &mut Findings) {
    let run = RunHistory::of(ev);
    let lapse = LockLapse {
        ttl: LOCK_TTL_SECS * 1_000_000_000,
        slack: CLOCK_SLACK_US * 1_000,
    };
    let evidence = coupon_verify::Evidence {
        operations: &run.ops,
        final_state: &run.final_state,
        templates: &run.templates,
        lock_lapse: Some(lapse),
        // Every nemesis of the load test that loses Redis state gives the engine a sign.
        redis_counters: RedisCounters::LossesSigned,
    };
    let mut findings = evidence.findings();
    // Only the load test reads the coupon ids the answers carried.
    findings.extend(check_answered_ids(&run.answered_ids));
    for finding in findings {
        f.flag(finding.invariant, finding.detail);
    }
    looked_at(ev, &run, f);
}

/// What each client-side check looked at, for the report.
fn looked_at(ev: &RunRecord<'_>, run: &RunHistory, f: &mut Findings) {
    let grants = Grants::of(&run.ops);
    for t in &run.templates {
        let counting = grants
            .owners
            .keys()
            .filter(|c| c.template == t.id && grants.still_counting(c, t))
            .count();
        let name = ev.templates.get(t.id as usize).map_or("?", |i| &i.name);
        f.checked(
            Invariant::I1,
            format!(
                "{name} (t{}): {counting} acknowledged coupons that no refund could have \
                 returned ≤ stock {}",
                t.id, t.stock
            ),
        );
    }
    let pairs: BTreeSet<(u32, &str)> = grants
        .owners
        .iter()
        .map(|(c, user)| (c.template, *user))
        .collect();
    f.checked(
        Invariant::I3,
        format!(
            "{} (user, template) pairs of acknowledged coupons and {} wallets read back \
             ({} coupons) within the limit",
            pairs.len(),
            ev.wallets.len(),
            run.final_state.coupons.len()
        ),
    );
    let acked = |is: fn(&CoreOp) -> bool| {
        run.ops
            .iter()
            .filter(|o| is(&o.op) && matches!(o.outcome, Ended::Ok(_)))
            .count()
    };
    f.checked(
        Invariant::I4,
        format!(
            "{} acknowledged redemptions: no coupon acknowledged for two live orders",
            acked(|op| matches!(op, CoreOp::Redeem { .. }))
        ),
    );
    let cross = ev.events.iter().filter(|e| e.op.cross_user()).count();
    f.checked(
        Invariant::I5,
        format!(
            "{cross} cross-user redeem/refund/lock attempts, each must be refused (403); no \
             acknowledged operation by anyone but a coupon's owner"
        ),
    );
    f.checked(
        Invariant::I6,
        format!(
            "{} acknowledged claims found in their user's coupons, the last acknowledged \
             operation of each coupon in its final status, every coupon explained by a claim",
            grants.owners.len()
        ),
    );
    if !run.final_state.unsettled.is_empty() {
        f.checked(
            Invariant::I6,
            format!(
                "{} template(s) skipped: still had work in flight",
                run.final_state.unsettled.len()
            ),
        );
    }
    let keys: HashSet<&CoreOp> = run
        .ops
        .iter()
        .filter(|o| matches!(o.op, CoreOp::Claim { .. }))
        .map(|o| &o.op)
        .collect();
    let claims = run
        .ops
        .iter()
        .filter(|o| matches!(o.op, CoreOp::Claim { .. }))
        .count();
    f.checked(
        Invariant::I7,
        format!(
            "{} claim request ids ({} answers kept for them): one coupon per request id, the \
             same answer on every retry",
            keys.len() as u64 + ev.refusals_not_kept,
            claims
        ),
    );
    f.checked(
        Invariant::I11,
        format!(
            "{} acknowledged locks and redemptions: one live order per coupon",
            acked(|op| matches!(op, CoreOp::Lock { .. } | CoreOp::Redeem { .. }))
        ),
    );
}
