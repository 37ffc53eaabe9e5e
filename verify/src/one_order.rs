//! I11 from a history: at most one live order per coupon. A coupon is held by an order from
//! an acknowledged lock or redemption until that order's release or refund; two orders
//! acknowledged as holding one coupon, with no release or refund of either that may have
//! taken effect anywhere in the history, held it at the same time — whatever order the
//! operations are placed in (mall #1003: five concurrent orders paid with one coupon).
//!
//! Sound with unknown outcomes and faults (an operation that may have taken effect counts as
//! a possible end of a hold), so it holds where the linearizability checker (I8) is set
//! aside; it is the direct statement of what I8 would also refute.

use std::collections::{BTreeMap, BTreeSet};

use crate::invariant::{Finding, Invariant};

use crate::{
    history::{Operation, Outcome},
    op::{CouponRef, Op},
};

/// I11 findings of `ops`, one per coupon held by several orders.
pub fn check_one_live_order(ops: &[Operation]) -> Vec<Finding> {
    let mut holders: BTreeMap<&CouponRef, BTreeSet<&str>> = BTreeMap::new();
    let mut ended: BTreeMap<&CouponRef, BTreeSet<&str>> = BTreeMap::new();
    for o in ops {
        let (Some(coupon), Some(order)) = (o.op.coupon(), o.op.order()) else {
            continue;
        };
        let may_have_acted = !matches!(o.outcome, Outcome::Fail(_));
        match (&o.op, &o.outcome) {
            (Op::Lock { .. } | Op::Redeem { .. }, Outcome::Ok(_)) => {
                holders.entry(coupon).or_default().insert(order);
            }
            (Op::Release { .. } | Op::Refund { .. }, _) if may_have_acted => {
                ended.entry(coupon).or_default().insert(order);
            }
            _ => {}
        }
    }
    holders
        .into_iter()
        .filter_map(|(coupon, orders)| {
            let never_ended: Vec<&str> = orders
                .iter()
                .copied()
                .filter(|o| !ended.get(coupon).is_some_and(|e| e.contains(o)))
                .collect();
            (never_ended.len() > 1).then(|| {
                Finding::new(
                    Invariant::I11,
                    format!(
                        "coupon {coupon} was acknowledged as held by orders {} at once: none of \
                         them released or refunded it",
                        never_ended.join(", ")
                    ),
                )
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::op::{
        OpResult,
        fixtures::{lock, redeem, release},
    };

    fn op(op: Op, outcome: Outcome) -> Operation {
        Operation {
            process: 0,
            op,
            call: 0,
            ret: Some(1),
            outcome,
        }
    }

    #[test]
    fn two_orders_holding_one_coupon_are_refuted_unless_one_let_go() {
        let both = vec![
            op(lock("r1", "a", "o1"), Outcome::Ok(OpResult::Locked)),
            op(redeem("r1", "a", "o2"), Outcome::Ok(OpResult::Redeemed)),
        ];
        let found = check_one_live_order(&both);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I11);

        let mut released = both.clone();
        released.push(op(release("r1", "a", "o1"), Outcome::Unknown));
        assert!(check_one_live_order(&released).is_empty());

        let same_order = vec![
            op(lock("r1", "a", "o1"), Outcome::Ok(OpResult::Locked)),
            op(redeem("r1", "a", "o1"), Outcome::Ok(OpResult::Redeemed)),
        ];
        assert!(check_one_live_order(&same_order).is_empty());
    }
}
