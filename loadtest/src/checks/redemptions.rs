//! I4 and I5 from what clients were told: no coupon acknowledged as redeemed by two live
//! orders, and nobody allowed to act on another user's coupon.

use std::sync::Arc;

use coupon_engine::Invariant;

use super::{Answers, Findings};
use crate::acks::{Op, Outcome};

/// I4: no two orders acknowledged without a refund between.
pub(super) fn single_use(answers: &Answers<'_>, f: &mut Findings) {
    let mut redeemed = 0usize;
    for (c, es) in &answers.owner_ops {
        let mut live: Option<&Arc<str>> = None;
        for e in es {
            match (e.op, e.outcome()) {
                (Op::Redeem, Outcome::Ok) => {
                    redeemed += 1;
                    if let (Some(prev), Some(order)) = (live, e.order_id.as_ref())
                        && prev != order
                    {
                        f.flag(
                            Invariant::I4,
                            format!(
                                "coupon {c} (user {}) was acknowledged as redeemed by order {prev} and then by order {order} with no refund between",
                                e.user
                            ),
                        );
                    }
                    live = e.order_id.as_ref();
                }
                (Op::Refund, Outcome::Ok | Outcome::Unknown) => live = None,
                _ => {}
            }
        }
    }
    f.checked(
        Invariant::I4,
        format!("{redeemed} acknowledged redemptions: no coupon acknowledged for two live orders"),
    );
}

/// I5: every cross-user attempt refused.
pub(super) fn cross_user(answers: &Answers<'_>, f: &mut Findings) {
    let mut cross = 0usize;
    for es in answers.cross_ops.values() {
        for e in es {
            cross += 1;
            if e.outcome() == Outcome::Ok {
                f.flag(
                    Invariant::I5,
                    format!(
                        "user {} got HTTP {} for {} of another user's coupon {} (order {})",
                        e.user,
                        e.status.unwrap_or(0),
                        e.op.name(),
                        e.coupon.map(|c| c.to_string()).unwrap_or_default(),
                        e.order_id.as_deref().unwrap_or("-"),
                    ),
                );
            }
        }
    }
    f.checked(
        Invariant::I5,
        format!("{cross} cross-user redeem/refund attempts, each must be refused (403)"),
    );
}
