//! I5 from what clients were told: nobody acts on another user's coupon. A coupon's owner is
//! the user its claim was granted to (or, for a coupon no client saw granted, its owner in
//! the final state); a redeem, refund, lock or release by anyone else must be refused.

use std::collections::BTreeMap;

use crate::{
    ack::FinalState,
    grants::Grants,
    history::{Operation, Outcome},
    invariant::{Finding, Invariant},
    op::CouponRef,
};

/// I5 findings of `ops`: each acknowledged operation on a coupon by a user who does not
/// own it.
pub fn check_owners(ops: &[Operation], final_state: &FinalState) -> Vec<Finding> {
    let grants = Grants::of(ops);
    let mut owners: BTreeMap<&CouponRef, &str> = grants.owners;
    let finals: Vec<(CouponRef, &str)> = final_state
        .coupons
        .iter()
        .map(|c| (c.coupon_ref(), c.user.as_str()))
        .collect();
    for (coupon, user) in &finals {
        owners.entry(coupon).or_insert(user);
    }
    ops.iter()
        .filter(|o| matches!(o.outcome, Outcome::Ok(_)))
        .filter_map(|o| {
            let coupon = o.op.coupon()?;
            let owner = *owners.get(coupon)?;
            (owner != o.op.user()).then(|| {
                Finding::new(
                    Invariant::I5,
                    format!("{} was acknowledged, but {coupon} belongs to {owner}", o.op),
                )
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{
        ack::{FinalCoupon, FinalStatus},
        op::{
            OpResult, Refusal,
            fixtures::{claim, coupon, redeem},
        },
    };

    fn op(op: crate::op::Op, outcome: Outcome) -> Operation {
        crate::history::fixtures::operation(op, outcome, 0, Some(1))
    }

    #[test]
    fn an_acknowledged_redeem_by_another_user_is_refuted_and_a_refused_one_is_not() {
        let claimed = op(
            claim("a", "r1"),
            Outcome::Ok(OpResult::Claimed {
                coupon: coupon("r1"),
            }),
        );
        let theft = op(redeem("r1", "b", "o1"), Outcome::Ok(OpResult::Redeemed));
        let found = check_owners(&[claimed.clone(), theft], &FinalState::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I5);

        let refused = op(redeem("r1", "b", "o1"), Outcome::Fail(Refusal::NotOwner));
        assert!(check_owners(&[claimed, refused], &FinalState::default()).is_empty());
    }

    #[test]
    fn a_coupon_no_client_saw_granted_is_owned_by_its_final_owner() {
        let theft = op(redeem("r1", "b", "o1"), Outcome::Ok(OpResult::Redeemed));
        let state = FinalState {
            coupons: vec![FinalCoupon {
                template: 0,
                request_id: "r1".into(),
                user: "a".into(),
                status: FinalStatus::Used { order: "o1".into() },
                live_orders: vec!["o1".into()],
            }],
            ..FinalState::default()
        };
        assert_eq!(check_owners(&[theft], &state).len(), 1);
    }
}
