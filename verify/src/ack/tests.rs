//! Final states that agree and disagree with what clients were told.

use super::*;
use crate::op::{
    Refusal,
    fixtures::{self, claim, coupon as coupon_ref},
};

fn redeem(req: &str, order: &str) -> Op {
    fixtures::redeem(req, "a", order)
}

fn refund(req: &str, order: &str) -> Op {
    fixtures::refund(req, "a", order)
}

fn at(op: Op, call: u64, ret: Option<u64>, outcome: Outcome) -> Operation {
    crate::history::fixtures::operation(op, outcome, call, ret)
}

fn ok(op: Op, call: u64, ret: u64) -> Operation {
    let result = match &op {
        Op::Claim { request_id, .. } => OpResult::Claimed {
            coupon: coupon_ref(request_id),
        },
        Op::Redeem { .. } => OpResult::Redeemed,
        Op::Refund { .. } => OpResult::Refunded,
        Op::Lock { .. } => OpResult::Locked,
        Op::Release { .. } => OpResult::Released,
    };
    at(op, call, Some(ret), Outcome::Ok(result))
}

fn fail(op: Op, call: u64, ret: u64) -> Operation {
    at(op, call, Some(ret), Outcome::Fail(Refusal::StockEmpty))
}

fn unknown(op: Op, call: u64) -> Operation {
    at(op, call, None, Outcome::Unknown)
}

fn coupon(user: &str, req: &str, status: FinalStatus, live: &[&str]) -> FinalCoupon {
    FinalCoupon {
        template: 0,
        request_id: req.into(),
        user: user.into(),
        status,
        live_orders: live.iter().map(|o| o.to_string()).collect(),
    }
}

fn used(order: &str) -> FinalStatus {
    FinalStatus::Used {
        order: order.into(),
    }
}

fn state(coupons: Vec<FinalCoupon>) -> FinalState {
    FinalState {
        coupons,
        ..FinalState::default()
    }
}

/// The invariants of the violations found, in order.
fn found(ops: &[Operation], final_state: &FinalState) -> Vec<Invariant> {
    check_operations(ops, final_state, None)
        .into_iter()
        .map(|v| v.invariant)
        .collect()
}

#[test]
fn accepts_a_consistent_run() {
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(claim("a", "r1"), 20, 30), // retry
        fail(claim("b", "r2"), 0, 10),
        unknown(claim("a", "r3"), 40), // took effect
        unknown(claim("a", "r4"), 50), // did not
        ok(redeem("r1", "o1"), 60, 70),
    ];
    let fin = state(vec![
        coupon("a", "r1", used("o1"), &["o1"]),
        coupon("a", "r3", FinalStatus::Issued, &[]),
    ]);
    assert_eq!(found(&ops, &fin), vec![]);
}

#[test]
fn accepts_refund_then_expiry() {
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(redeem("r1", "o1"), 20, 30),
        ok(refund("r1", "o1"), 40, 50),
    ];
    let fin = state(vec![coupon("a", "r1", FinalStatus::Expired, &[])]);
    assert_eq!(found(&ops, &fin), vec![]);
}

#[test]
fn rejects_lost_claim() {
    let ops = [ok(claim("a", "r1"), 0, 10)];
    assert_eq!(found(&ops, &state(vec![])), vec![Invariant::I6]);
    // A coupon under that request id owned by someone else does not count.
    let fin = state(vec![coupon("b", "r1", FinalStatus::Issued, &[])]);
    assert_eq!(found(&ops, &fin), vec![Invariant::I6, Invariant::I6]);
}

#[test]
fn rejects_coupon_only_refused_claims_asked_for() {
    let ops = [fail(claim("a", "r1"), 0, 10)];
    let fin = state(vec![coupon("a", "r1", FinalStatus::Issued, &[])]);
    let violations = check_operations(&ops, &fin, None);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].invariant, Invariant::I6);
    assert!(violations[0].detail.contains("t0/r1"), "{violations:?}");
}

#[test]
fn rejects_coupon_nobody_asked_for() {
    let fin = state(vec![coupon("a", "r9", FinalStatus::Issued, &[])]);
    assert_eq!(found(&[], &fin), vec![Invariant::I6]);
}

#[test]
fn rejects_double_issue() {
    let ops = [ok(claim("a", "r1"), 0, 10), ok(claim("a", "r1"), 20, 30)];
    let fin = state(vec![
        coupon("a", "r1", FinalStatus::Issued, &[]),
        coupon("a", "r1", FinalStatus::Issued, &[]),
    ]);
    assert_eq!(found(&ops, &fin), vec![Invariant::I7]);
}

#[test]
fn rejects_lost_redeem() {
    let ops = [ok(claim("a", "r1"), 0, 10), ok(redeem("r1", "o1"), 20, 30)];
    let fin = state(vec![coupon("a", "r1", FinalStatus::Issued, &[])]);
    assert_eq!(found(&ops, &fin), vec![Invariant::I6]);
    // Used by the order but its use-log row is gone.
    let fin = state(vec![coupon("a", "r1", used("o1"), &[])]);
    assert_eq!(found(&ops, &fin), vec![Invariant::I6]);
}

#[test]
fn rejects_lost_refund() {
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(redeem("r1", "o1"), 20, 30),
        ok(refund("r1", "o1"), 40, 50),
    ];
    let fin = state(vec![coupon("a", "r1", used("o1"), &["o1"])]);
    assert_eq!(found(&ops, &fin), vec![Invariant::I6]);
}

#[test]
fn does_not_judge_an_overtaken_acknowledgement() {
    // An unknown refund may have landed after the acknowledged redeem.
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(redeem("r1", "o1"), 20, 30),
        unknown(refund("r1", "o1"), 15),
    ];
    let fin = state(vec![coupon("a", "r1", FinalStatus::Issued, &[])]);
    assert_eq!(found(&ops, &fin), vec![]);
    // An overlapping acknowledged refund may have been applied last.
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(refund("r1", "o1"), 21, 28),
        ok(redeem("r1", "o1"), 20, 30),
    ];
    assert_eq!(found(&ops, &fin), vec![]);
    // A refused operation changed nothing: the redeem is judged.
    let ops = [
        ok(claim("a", "r1"), 0, 10),
        ok(redeem("r1", "o1"), 20, 30),
        fail(refund("r1", "o1"), 25, 40),
    ];
    assert_eq!(found(&ops, &fin), vec![Invariant::I6]);
}

#[test]
fn check_acks_reads_a_recorded_history() {
    let rec = crate::history::Recorder::new();
    let id = rec.invoke(0, claim("a", "r1"));
    rec.complete(
        id,
        crate::history::EventKind::Ok,
        Some(OpResult::Claimed {
            coupon: coupon_ref("r1"),
        }),
    );
    let fin = state(vec![coupon("a", "r1", FinalStatus::Issued, &[])]);
    assert_eq!(check_acks(&rec.snapshot(), &fin).unwrap(), vec![]);
    assert_eq!(
        check_acks(&rec.snapshot(), &state(vec![])).unwrap().len(),
        1
    );
}

#[test]
fn an_unsettled_template_is_not_compared_and_a_lapsed_lock_is_not_lost() {
    let claimed = ok(claim("a", "r1"), 0, 1);
    let nothing = state(vec![]);
    assert_eq!(
        found(std::slice::from_ref(&claimed), &nothing),
        [Invariant::I6]
    );
    let unsettled = FinalState {
        unsettled: [0].into(),
        ..FinalState::default()
    };
    assert!(found(std::slice::from_ref(&claimed), &unsettled).is_empty());

    let ops = vec![claimed, ok(fixtures::lock("r1", "a", "o1"), 2, 3)];
    let lapsed = state(vec![coupon("a", "r1", FinalStatus::Issued, &[])]);
    assert_eq!(
        found(&ops, &lapsed),
        [Invariant::I6],
        "locks never lapse here"
    );
    let lapse = LockLapse { ttl: 10, slack: 0 };
    assert!(check_operations(&ops, &lapsed, Some(lapse)).is_empty());
}
