//! I7 from what clients were told: a retried request has no second effect. A claim answered
//! once is answered the same way on every retry (never refused, never another coupon), one
//! coupon is never answered to two claims, and an acknowledged redeem, refund, lock or
//! release sent again is answered again, unless something else may have acted on the coupon
//! in between.
//!
//! `Busy` is not a refusal of the request's effect (nothing was tried), so it is never a
//! finding here.

use std::collections::{BTreeMap, HashMap};

use crate::{
    history::{Operation, Outcome},
    invariant::{Finding, Invariant},
    op::{CouponRef, Op, Refusal},
};

/// What Redis's counters may have gone through while the history ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RedisCounters {
    /// Every loss of Redis state gave the engine a sign before it admitted again (a
    /// restart, a promotion, dropped keys): it checks a refusal against Postgres then, so a
    /// granted claim refused on retry is a finding.
    #[default]
    LossesSigned,
    /// Redis's keys may have gone stale with no sign (an eviction, a restarted or promoted
    /// server given the engine's scripts beforehand): the engine's known gap
    /// (docs/ARCHITECTURE.md, "A Redis that lies"). A retried claim refused by what Redis
    /// holds — `stock_empty` or `user_limit` by its counters, `invalid_request` by its
    /// record of the request id, which a stale server may have let another user's claim
    /// take — is not a finding; every other refused repeat still is.
    MayBeStaleUnsigned,
}

/// I7 findings of `ops`: acknowledged requests whose repeat was refused.
pub fn check_retries(ops: &[Operation], counters: RedisCounters) -> Vec<Finding> {
    // Two operations are the same request when they are equal: a claim's template, user
    // and request id; any other operation's kind, coupon, user and order.
    let mut by_request: HashMap<&Op, Vec<&Operation>> = HashMap::new();
    let mut first_seen: Vec<&Op> = Vec::new();
    for o in ops {
        let tries = by_request.entry(&o.op).or_default();
        if tries.is_empty() {
            first_seen.push(&o.op);
        }
        tries.push(o);
    }
    let mut found = Vec::new();
    for tries in first_seen.iter().filter_map(|op| by_request.get(op)) {
        for refused in tries
            .iter()
            .filter(|o| refused(o) && !refused_by_counters_allowed(o, counters))
        {
            let Some(acked) = tries.iter().find(|o| {
                matches!(o.outcome, Outcome::Ok(_)) && o.ret.is_some_and(|r| r < refused.call)
            }) else {
                continue;
            };
            if acked.op.coupon().is_some() && someone_else_may_have_acted(ops, acked, refused) {
                continue;
            }
            found.push(Finding::new(
                Invariant::I7,
                format!(
                    "{} was acknowledged ({}), then the same request again was answered {}",
                    acked.op, acked.outcome, refused.outcome
                ),
            ));
        }
    }
    found
}

/// I7 findings of the engine's coupon ids answered to claims (`coupon` named by its claim,
/// `id` what the answer said): one claim answered two coupons, or one coupon answered to two
/// claims.
pub fn check_answered_ids(answers: &[(CouponRef, String)]) -> Vec<Finding> {
    let mut ids: BTreeMap<&CouponRef, &str> = BTreeMap::new();
    let mut claims: BTreeMap<&str, &CouponRef> = BTreeMap::new();
    let mut found = Vec::new();
    for (coupon, id) in answers {
        match ids.get(coupon) {
            Some(first) if first != id => found.push(Finding::new(
                Invariant::I7,
                format!("claim {coupon} was answered coupon {first} and then coupon {id}"),
            )),
            Some(_) => continue,
            None => {
                ids.insert(coupon, id);
            }
        }
        match claims.get(id.as_str()) {
            Some(other) if *other != coupon => found.push(Finding::new(
                Invariant::I7,
                format!("coupon {id} was answered to two claims: {other} and {coupon}"),
            )),
            Some(_) => {}
            None => {
                claims.insert(id, coupon);
            }
        }
    }
    found
}

fn refused_by_counters_allowed(o: &Operation, counters: RedisCounters) -> bool {
    counters == RedisCounters::MayBeStaleUnsigned
        && matches!(o.op, Op::Claim { .. })
        && matches!(
            o.outcome,
            Outcome::Fail(Refusal::StockEmpty | Refusal::UserLimit | Refusal::InvalidRequest)
        )
}

fn refused(o: &Operation) -> bool {
    matches!(o.outcome, Outcome::Fail(r) if r != Refusal::Busy)
}

/// Whether an operation on the coupon other than the two may have taken effect between the
/// acknowledgement and the refused repeat.
fn someone_else_may_have_acted(ops: &[Operation], acked: &Operation, repeat: &Operation) -> bool {
    let coupon = acked.op.coupon();
    ops.iter().any(|o| {
        !std::ptr::eq(o, acked)
            && !std::ptr::eq(o, repeat)
            && o.op.coupon() == coupon
            && !matches!(o.outcome, Outcome::Fail(_))
            && repeat.ret.is_none_or(|r| o.call < r)
            && o.ret.is_none_or(|r| r > acked.call)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::op::{
        OpResult,
        fixtures::{claim, coupon, lock, redeem, refund},
    };

    const SIGNED: RedisCounters = RedisCounters::LossesSigned;

    fn timed(op: Op, outcome: Outcome, call: u64, ret: Option<u64>) -> Operation {
        crate::history::fixtures::operation(op, outcome, call, ret)
    }

    #[test]
    fn a_granted_claim_refused_on_retry_is_refuted_but_busy_is_not() {
        let granted = timed(
            claim("a", "r1"),
            Outcome::Ok(OpResult::Claimed {
                coupon: coupon("r1"),
            }),
            0,
            Some(10),
        );
        let refused = timed(
            claim("a", "r1"),
            Outcome::Fail(Refusal::StockEmpty),
            20,
            Some(30),
        );
        let found = check_retries(&[granted.clone(), refused.clone()], SIGNED);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I7);
        let busy = timed(claim("a", "r1"), Outcome::Fail(Refusal::Busy), 20, Some(30));
        assert!(check_retries(&[granted.clone(), busy], SIGNED).is_empty());

        // Counters stale with no sign may refuse the retry (the known gap); anything else
        // refusing it still is a finding.
        let unsigned = RedisCounters::MayBeStaleUnsigned;
        assert!(check_retries(&[granted.clone(), refused], unsigned).is_empty());
        let taken = timed(
            claim("a", "r1"),
            Outcome::Fail(Refusal::InvalidRequest),
            20,
            Some(30),
        );
        assert!(check_retries(&[granted.clone(), taken], unsigned).is_empty());
        let not_found = timed(
            claim("a", "r1"),
            Outcome::Fail(Refusal::NotFound),
            20,
            Some(30),
        );
        assert_eq!(check_retries(&[granted, not_found], unsigned).len(), 1);
    }

    #[test]
    fn a_repeated_redeem_refused_is_refuted_unless_another_operation_came_between() {
        let redeemed = timed(
            redeem("r1", "a", "o1"),
            Outcome::Ok(OpResult::Redeemed),
            0,
            Some(10),
        );
        let again = timed(
            redeem("r1", "a", "o1"),
            Outcome::Fail(Refusal::InvalidState),
            20,
            Some(30),
        );
        assert_eq!(
            check_retries(&[redeemed.clone(), again.clone()], SIGNED).len(),
            1
        );
        let refund_between = timed(refund("r1", "a", "o1"), Outcome::Unknown, 12, None);
        assert!(
            check_retries(&[redeemed.clone(), refund_between, again.clone()], SIGNED).is_empty()
        );
        // An operation answered before the acknowledged one was sent is not between.
        let lock_before = timed(
            lock("r1", "a", "o2"),
            Outcome::Ok(OpResult::Locked),
            0,
            Some(0),
        );
        let redeemed_later = timed(
            redeem("r1", "a", "o1"),
            Outcome::Ok(OpResult::Redeemed),
            1,
            Some(10),
        );
        assert_eq!(
            check_retries(&[lock_before, redeemed_later, again], SIGNED).len(),
            1
        );
    }

    #[test]
    fn one_claim_answered_two_coupons_or_one_coupon_two_claims_is_refuted() {
        let same = vec![(coupon("r1"), "c1".to_owned()), (coupon("r1"), "c1".into())];
        assert!(check_answered_ids(&same).is_empty());
        let two_coupons = vec![(coupon("r1"), "c1".to_owned()), (coupon("r1"), "c2".into())];
        assert_eq!(check_answered_ids(&two_coupons).len(), 1);
        let two_claims = vec![(coupon("r1"), "c1".to_owned()), (coupon("r2"), "c1".into())];
        assert_eq!(check_answered_ids(&two_claims).len(), 1);
    }
}
