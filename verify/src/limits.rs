//! I1 and I3 from what clients were told, and I3 from the final state: no template
//! acknowledged more coupons than its stock, no user acknowledged more than the per-user
//! limit (counting only coupons no refund could have returned to stock), and no user holding
//! more than the limit at the end.
//!
//! Sound with unknown outcomes: an unknown claim is never counted as granted, and an unknown
//! refund may have returned its coupon.

use std::collections::BTreeMap;

use crate::{
    ack::{FinalState, FinalStatus},
    grants::Grants,
    history::Operation,
    invariant::{Finding, Invariant},
    op::TemplateSpec,
};

/// I1 and I3 findings from the acknowledged claims of `ops`.
pub fn check_acknowledged_limits(ops: &[Operation], templates: &[TemplateSpec]) -> Vec<Finding> {
    let grants = Grants::of(ops);
    let mut per_template: BTreeMap<u32, i64> = BTreeMap::new();
    let mut per_user: BTreeMap<(u32, &str), i64> = BTreeMap::new();
    for (coupon, user) in &grants.owners {
        let Some(t) = spec(templates, coupon.template) else {
            continue;
        };
        if grants.still_counting(coupon, t) {
            *per_template.entry(t.id).or_default() += 1;
            *per_user.entry((t.id, user)).or_default() += 1;
        }
    }
    let mut found = Vec::new();
    for (id, n) in per_template {
        if let Some(t) = spec(templates, id).filter(|t| n > t.stock) {
            found.push(Finding::new(
                Invariant::I1,
                format!(
                    "template t{id}: {n} distinct coupons acknowledged to clients still count \
                     against a stock of {} (oversold by at least {})",
                    t.stock,
                    n - t.stock
                ),
            ));
        }
    }
    for ((id, user), n) in per_user {
        if let Some(t) = spec(templates, id).filter(|t| n > t.per_user_limit) {
            found.push(Finding::new(
                Invariant::I3,
                format!(
                    "template t{id}: user {user} was acknowledged {n} coupons, limit {}",
                    t.per_user_limit
                ),
            ));
        }
    }
    found
}

/// I3 findings from the final state: a user holding more coupons that count against the
/// limit than it allows.
pub fn check_held_limits(final_state: &FinalState, templates: &[TemplateSpec]) -> Vec<Finding> {
    let mut held: BTreeMap<(u32, &str), i64> = BTreeMap::new();
    for c in &final_state.coupons {
        if c.status != FinalStatus::Revoked {
            *held.entry((c.template, c.user.as_str())).or_default() += 1;
        }
    }
    held.into_iter()
        .filter_map(|((id, user), n)| {
            let t = spec(templates, id).filter(|t| n > t.per_user_limit)?;
            Some(Finding::new(
                Invariant::I3,
                format!(
                    "template t{id}: user {user} holds {n} coupons counting against the limit {}",
                    t.per_user_limit
                ),
            ))
        })
        .collect()
}

fn spec(templates: &[TemplateSpec], id: u32) -> Option<&TemplateSpec> {
    templates.iter().find(|t| t.id == id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{
        ack::FinalCoupon,
        history::Outcome,
        op::{
            OpResult, Policy,
            fixtures::{claim, coupon, refund},
        },
    };

    fn spec(stock: i64, limit: i64, policy: Policy) -> Vec<TemplateSpec> {
        vec![TemplateSpec {
            id: 0,
            stock,
            per_user_limit: limit,
            policy,
        }]
    }

    fn granted(user: &str, req: &str) -> Operation {
        crate::history::fixtures::operation(
            claim(user, req),
            Outcome::Ok(OpResult::Claimed {
                coupon: coupon(req),
            }),
            0,
            Some(1),
        )
    }

    #[test]
    fn more_grants_than_stock_is_an_oversell_unless_a_refund_may_have_returned_one() {
        let ops = vec![granted("a", "r1"), granted("b", "r2")];
        let found = check_acknowledged_limits(&ops, &spec(1, 5, Policy::ReturnToStock));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I1);
        assert!(check_acknowledged_limits(&ops, &spec(2, 5, Policy::ReturnToStock)).is_empty());

        let mut refunded = ops.clone();
        refunded.push(Operation {
            process: 1,
            op: refund("r1", "a", "o1"),
            call: 2,
            ret: None,
            outcome: Outcome::Unknown,
        });
        assert!(
            check_acknowledged_limits(&refunded, &spec(1, 5, Policy::ReturnToStock)).is_empty()
        );
        // A refund back to the user never frees stock.
        assert_eq!(
            check_acknowledged_limits(&refunded, &spec(1, 5, Policy::ReturnToUser)).len(),
            1
        );
    }

    #[test]
    fn one_user_past_the_limit_is_refuted_by_acks_and_by_holdings() {
        let ops = vec![granted("a", "r1"), granted("a", "r2")];
        let found = check_acknowledged_limits(&ops, &spec(10, 1, Policy::ReturnToUser));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, Invariant::I3);

        let held = |status| FinalCoupon {
            template: 0,
            request_id: "r".into(),
            user: "a".into(),
            status,
            live_orders: vec![],
        };
        let state = FinalState {
            coupons: vec![held(FinalStatus::Issued), held(FinalStatus::Expired)],
            ..FinalState::default()
        };
        assert_eq!(
            check_held_limits(&state, &spec(10, 1, Policy::ReturnToUser)).len(),
            1
        );
        let state = FinalState {
            coupons: vec![held(FinalStatus::Issued), held(FinalStatus::Revoked)],
            ..FinalState::default()
        };
        assert!(check_held_limits(&state, &spec(10, 1, Policy::ReturnToUser)).is_empty());
    }
}
