//! What a history says was granted: the coupons acknowledged to claims, and whether a refund
//! may have sent one back to stock. The client-side checkers of I1, I3 and I5 count from it.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    history::{Operation, Outcome},
    op::{CouponRef, Op, OpResult, Policy, TemplateSpec},
};

/// The coupons acknowledged to claims, each with the user it was granted to.
pub struct Grants<'a> {
    /// Coupon → the user whose claim was answered with it (the first such answer).
    pub owners: BTreeMap<&'a CouponRef, &'a str>,
    /// Coupons a refund that may have acted was sent for.
    refund_tried: BTreeSet<&'a CouponRef>,
}

impl<'a> Grants<'a> {
    /// The grants of `ops`.
    pub fn of(ops: &'a [Operation]) -> Self {
        let mut owners = BTreeMap::new();
        let mut refund_tried = BTreeSet::new();
        for op in ops {
            match (&op.op, &op.outcome) {
                (Op::Claim { user, .. }, Outcome::Ok(OpResult::Claimed { coupon })) => {
                    owners.entry(coupon).or_insert(user.as_str());
                }
                (Op::Refund { coupon, .. }, outcome) if !matches!(outcome, Outcome::Fail(_)) => {
                    refund_tried.insert(coupon);
                }
                _ => {}
            }
        }
        Self {
            owners,
            refund_tried,
        }
    }

    /// Whether `coupon` of `template` certainly still counts against stock and the limit: a
    /// refund that returns to stock was never tried on it.
    pub fn still_counting(&self, coupon: &CouponRef, template: &TemplateSpec) -> bool {
        template.policy == Policy::ReturnToUser || !self.refund_tried.contains(coupon)
    }
}
