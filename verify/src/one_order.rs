//! I11 from a history: at most one live order per coupon. A coupon is held by an order from
//! an acknowledged lock or redemption until that order's release or refund, or its lock's
//! lapse; two orders acknowledged as holding one coupon, when neither hold may have ended
//! before the other was answered, held it at the same time — whatever order the operations
//! are placed in (mall #1003: five concurrent orders paid with one coupon). The property
//! tests and the load test both judge I11 here.
//!
//! Sound with unknown outcomes and faults (an operation that may have taken effect counts as
//! a possible end of a hold), so it holds where the linearizability checker (I8) is set
//! aside; it is the direct statement of what I8 would also refute.

use std::collections::BTreeMap;

use crate::invariant::{Finding, Invariant};

use crate::{
    history::{Operation, Outcome},
    op::{CouponRef, Op},
};

/// When a checkout lock lapses by itself: `ttl` after it was taken, by the server's clock,
/// which may be `slack` off the history's (nanoseconds). `None` where no lock ever lapses
/// within a history (the property tests' locks outlast every case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockLapse {
    /// The lock's time to live.
    pub ttl: u64,
    /// How far the server's clock may be from the history's.
    pub slack: u64,
}

/// One acknowledged hold of a coupon by an order.
struct Hold<'a> {
    order: &'a str,
    /// When its lock may have been taken: the call of the order's first lock of the coupon
    /// that may have acted. A retried or repeated lock is answered as a replay of that one
    /// and keeps its end, so the lapse is timed from it, not from the acknowledged try.
    taken: u64,
    ret: u64,
    lapses: bool,
}

/// I11 findings of `ops`, one per pair of orders acknowledged as holding one coupon at
/// once; `lapse` says when a lock ends by itself.
pub fn check_one_live_order(ops: &[Operation], lapse: Option<LockLapse>) -> Vec<Finding> {
    overlapping_holds(
        ops,
        &Rule {
            invariant: Invariant::I11,
            holds: |op| matches!(op, Op::Lock { .. } | Op::Redeem { .. }),
            ends: |op| matches!(op, Op::Release { .. } | Op::Refund { .. }),
            lapse,
        },
    )
}

/// I4 findings of `ops`: two orders acknowledged as redeeming one coupon, when neither
/// redemption may have been refunded before the other was answered.
pub fn check_single_use(ops: &[Operation]) -> Vec<Finding> {
    overlapping_holds(
        ops,
        &Rule {
            invariant: Invariant::I4,
            holds: |op| matches!(op, Op::Redeem { .. }),
            ends: |op| matches!(op, Op::Refund { .. }),
            lapse: None,
        },
    )
}

/// What holds a coupon, what lets it go, and which invariant two holds at once break.
struct Rule {
    invariant: Invariant,
    holds: fn(&Op) -> bool,
    ends: fn(&Op) -> bool,
    lapse: Option<LockLapse>,
}

fn overlapping_holds(ops: &[Operation], rule: &Rule) -> Vec<Finding> {
    let mut by_coupon: BTreeMap<&CouponRef, Vec<&Operation>> = BTreeMap::new();
    for o in ops {
        if let (Some(coupon), Some(_)) = (o.op.coupon(), o.op.order()) {
            by_coupon.entry(coupon).or_default().push(o);
        }
    }
    let mut found = Vec::new();
    for (coupon, ops) in by_coupon {
        let holds: Vec<Hold<'_>> = ops
            .iter()
            .filter(|o| (rule.holds)(&o.op) && matches!(o.outcome, Outcome::Ok(_)))
            .filter_map(|o| {
                let order = o.op.order()?;
                let taken = ops
                    .iter()
                    .filter(|l| {
                        matches!(l.op, Op::Lock { .. })
                            && l.op.order() == Some(order)
                            && !matches!(l.outcome, Outcome::Fail(_))
                    })
                    .map(|l| l.call)
                    .min()
                    .unwrap_or(o.call);
                Some(Hold {
                    order,
                    taken,
                    ret: o.ret?,
                    lapses: matches!(o.op, Op::Lock { .. }),
                })
            })
            .collect();
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                if a.order != b.order
                    && !may_have_ended(&ops, a, b, rule)
                    && !may_have_ended(&ops, b, a, rule)
                {
                    found.push(Finding::new(
                        rule.invariant,
                        format!(
                            "coupon {coupon} was acknowledged as held by order {} and by order \
                             {} at once: neither was released, refunded or lapsed before the \
                             other",
                            a.order, b.order
                        ),
                    ));
                }
            }
        }
    }
    found
}

/// Whether `first`'s hold may have ended before `then` took effect: an operation ending it
/// that may have acted and was called before `then` returned, or its lock's lapse.
fn may_have_ended(ops: &[&Operation], first: &Hold<'_>, then: &Hold<'_>, rule: &Rule) -> bool {
    let lapsed = rule.lapse.is_some_and(|l| {
        first.lapses && then.ret.saturating_add(l.slack) >= first.taken.saturating_add(l.ttl)
    });
    lapsed
        || ops.iter().any(|o| {
            (rule.ends)(&o.op)
                && !matches!(o.outcome, Outcome::Fail(_))
                && o.op.order() == Some(first.order)
                && o.call <= then.ret
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::op::{
        OpResult,
        fixtures::{lock, redeem, refund, release},
    };

    fn op(op: Op, outcome: Outcome) -> Operation {
        crate::history::fixtures::operation(op, outcome, 0, Some(1))
    }

    #[test]
    fn two_orders_holding_one_coupon_are_refuted_unless_one_let_go() {
        let both = vec![
            op(lock("r1", "a", "o1"), Outcome::Ok(OpResult::Locked)),
            op(redeem("r1", "a", "o2"), Outcome::Ok(OpResult::Redeemed)),
        ];
        let found = check_one_live_order(&both, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I11);

        let mut released = both.clone();
        released.push(op(release("r1", "a", "o1"), Outcome::Unknown));
        assert!(check_one_live_order(&released, None).is_empty());

        let same_order = vec![
            op(lock("r1", "a", "o1"), Outcome::Ok(OpResult::Locked)),
            op(redeem("r1", "a", "o1"), Outcome::Ok(OpResult::Redeemed)),
        ];
        assert!(check_one_live_order(&same_order, None).is_empty());
    }

    fn timed(op: Op, outcome: Outcome, call: u64, ret: u64) -> Operation {
        crate::history::fixtures::operation(op, outcome, call, Some(ret))
    }

    #[test]
    fn a_release_called_after_the_other_order_was_answered_ends_nothing_in_time() {
        let locked = Outcome::Ok(OpResult::Locked);
        let late_release = vec![
            timed(lock("r1", "a", "o1"), locked.clone(), 0, 10),
            timed(lock("r1", "a", "o2"), locked.clone(), 20, 30),
            timed(
                release("r1", "a", "o1"),
                Outcome::Ok(OpResult::Released),
                40,
                50,
            ),
        ];
        assert_eq!(check_one_live_order(&late_release, None).len(), 1);
        let early_release = vec![
            timed(lock("r1", "a", "o1"), locked.clone(), 0, 10),
            timed(
                release("r1", "a", "o1"),
                Outcome::Ok(OpResult::Released),
                25,
                35,
            ),
            timed(lock("r1", "a", "o2"), locked.clone(), 20, 30),
        ];
        assert!(check_one_live_order(&early_release, None).is_empty());
        // A refused release acted on nothing.
        let refused = vec![
            timed(lock("r1", "a", "o1"), locked.clone(), 0, 10),
            timed(
                release("r1", "a", "o1"),
                Outcome::Fail(crate::op::Refusal::NotOwner),
                12,
                14,
            ),
            timed(lock("r1", "a", "o2"), locked, 20, 30),
        ];
        assert_eq!(check_one_live_order(&refused, None).len(), 1);
    }

    #[test]
    fn a_lock_that_lapsed_before_the_other_order_was_answered_holds_nothing() {
        let locked = Outcome::Ok(OpResult::Locked);
        let ops = vec![
            timed(lock("r1", "a", "o1"), locked.clone(), 0, 10),
            timed(lock("r1", "a", "o2"), locked, 2_000, 2_010),
        ];
        let lapse = |ttl| Some(LockLapse { ttl, slack: 100 });
        assert!(check_one_live_order(&ops, lapse(1_500)).is_empty());
        assert!(
            check_one_live_order(&ops, lapse(1_900)).is_empty(),
            "within the slack"
        );
        assert_eq!(check_one_live_order(&ops, lapse(5_000)).len(), 1);
        assert_eq!(check_one_live_order(&ops, None).len(), 1);
    }

    #[test]
    fn two_redemptions_at_once_break_single_use_and_a_lock_beside_one_does_not() {
        let redeemed = Outcome::Ok(OpResult::Redeemed);
        let twice = vec![
            timed(redeem("r1", "a", "o1"), redeemed.clone(), 0, 10),
            timed(redeem("r1", "a", "o2"), redeemed.clone(), 20, 30),
        ];
        let found = check_single_use(&twice);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I4);

        let mut refunded = twice.clone();
        refunded.push(timed(refund("r1", "a", "o1"), Outcome::Unknown, 15, 16));
        assert!(check_single_use(&refunded).is_empty());

        let lock_beside = vec![
            timed(lock("r1", "a", "o1"), Outcome::Ok(OpResult::Locked), 0, 10),
            timed(redeem("r1", "a", "o2"), redeemed, 20, 30),
        ];
        assert!(check_single_use(&lock_beside).is_empty());
    }

    #[test]
    fn a_lock_retried_late_lapses_from_its_first_try() {
        let locked = Outcome::Ok(OpResult::Locked);
        let lapse = Some(LockLapse {
            ttl: 2_000,
            slack: 0,
        });
        // o1's first try may have locked at 0 (unknown); its retry is answered as a replay
        // of it, keeping its end at 2_000, so o2's lock at 2_100 is legal.
        let ops = vec![
            Operation {
                process: 0,
                op: lock("r1", "a", "o1"),
                call: 0,
                ret: None,
                outcome: Outcome::Unknown,
            },
            timed(lock("r1", "a", "o1"), locked.clone(), 1_050, 1_060),
            timed(lock("r1", "a", "o2"), locked.clone(), 2_100, 2_120),
        ];
        assert!(check_one_live_order(&ops, lapse).is_empty());
        // Without the first try the acknowledged one holds until 3_050.
        assert_eq!(check_one_live_order(&ops[1..], lapse).len(), 1);
    }
}
