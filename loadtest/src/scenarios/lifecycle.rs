//! `lifecycle` (the claim-redeem-refund life cycle): claim → redeem with a random order →
//! duplicate submissions (same ids: same answer), a clashing order (must get 409
//! `already_used`), cross-user attempts on the coupon (must get 403 `not_owner`), some
//! refunds (policy `return_to_user` or `return_to_stock`, alternately) and re-redeems.

use goose::prelude::*;

use super::{
    Ctx, Session,
    ops::{self, CouponRef},
};
use crate::{
    acks::Op,
    rng::Rng,
    setup::Customer,
    templates::{Role, TemplateInfo},
};
use coupon_engine::RefundPolicy;

/// Share of redeemed coupons then redeemed for another order (a clash).
const CLASH: f64 = 0.5;
/// Share of redeemed coupons another shopper tries to redeem, and to refund.
const CROSS_USER: f64 = 0.25;
/// Share of redemptions refunded.
const REFUND: f64 = 0.4;
/// Share of coupons refunded to their user that are redeemed again.
const REDEEM_AGAIN: f64 = 0.5;
/// Share of journeys that end with a look at the wallet.
const VIEW_WALLET: f64 = 0.1;

/// One journey on the lifecycle templates (alternating refund policies).
pub(crate) async fn iteration(
    user: &mut GooseUser,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    let (n, customer) = ctx.customer(s.idx, s.iter);
    let role = if s.iter.is_multiple_of(2) {
        Role::ReturnToUser
    } else {
        Role::ReturnToStock
    };
    journey(user, ctx, s, n, customer, ctx.template(role)).await
}

/// A random order amount for `template` (sometimes below its minimum, if it has one).
fn order_amount(rng: &mut Rng, template: &TemplateInfo) -> i64 {
    match template.min_order_amount {
        Some(min) => rng.range(min / 5, min * 4),
        None => rng.range(1_000, 100_000),
    }
}

/// Claim, redeem and maybe refund one coupon of `template` as shopper `n`.
pub(crate) async fn journey(
    user: &mut GooseUser,
    ctx: &Ctx,
    s: &mut Session,
    n: usize,
    customer: &Customer,
    template: &TemplateInfo,
) -> TransactionResult {
    let me = s.idx;
    let request_id = format!("{}-{me}-{}", ctx.tag, s.iter);
    let claimed = ops::claim(user, ctx, me, customer, template.id, &request_id, false).await?;
    let Some(coupon) = claimed.coupon() else {
        return Ok(());
    };
    if s.rng.chance(ctx.duplicate_rate) {
        ops::claim(user, ctx, me, customer, template.id, &request_id, true).await?;
    }
    let target = CouponRef {
        coupon,
        template: template.id,
    };
    let iter = s.iter;
    let order = |k: u32| format!("o{}-{me}-{iter}-{k}", ctx.tag);
    let first = order(1);
    let amount = order_amount(&mut s.rng, template);
    let business: &[&str] = &["below_min_amount"];
    let redeemed = ops::redeem(
        user,
        ctx,
        me,
        customer,
        &target,
        &first,
        amount,
        Op::Redeem,
        business,
        false,
    )
    .await?;
    if s.rng.chance(CROSS_USER) {
        let intruder = ctx.intruder(n, &mut s.rng);
        let theirs = order(3);
        ops::redeem(
            user,
            ctx,
            me,
            intruder,
            &target,
            &theirs,
            amount,
            Op::RedeemCrossUser,
            &["not_owner"],
            false,
        )
        .await?;
    }
    if !redeemed.is_ok() {
        return Ok(());
    }
    if s.rng.chance(ctx.duplicate_rate) {
        ops::redeem(
            user,
            ctx,
            me,
            customer,
            &target,
            &first,
            amount,
            Op::Redeem,
            &[],
            true,
        )
        .await?;
    }
    if s.rng.chance(CLASH) {
        let other = order(2);
        ops::redeem(
            user,
            ctx,
            me,
            customer,
            &target,
            &other,
            amount,
            Op::Redeem,
            &["already_used"],
            false,
        )
        .await?;
    }
    if s.rng.chance(CROSS_USER) {
        let intruder = ctx.intruder(n, &mut s.rng);
        ops::refund(
            user,
            ctx,
            me,
            intruder,
            &target,
            &first,
            Op::RefundCrossUser,
            &["not_owner"],
            false,
        )
        .await?;
    }
    if s.rng.chance(REFUND) {
        let refunded = ops::refund(
            user,
            ctx,
            me,
            customer,
            &target,
            &first,
            Op::Refund,
            &[],
            false,
        )
        .await?;
        if refunded.is_ok() {
            if s.rng.chance(ctx.duplicate_rate) {
                ops::refund(
                    user,
                    ctx,
                    me,
                    customer,
                    &target,
                    &first,
                    Op::Refund,
                    &[],
                    true,
                )
                .await?;
            }
            if template.refund_policy == RefundPolicy::ReturnToUser && s.rng.chance(REDEEM_AGAIN) {
                let again = order(4);
                let amount = order_amount(&mut s.rng, template);
                ops::redeem(
                    user,
                    ctx,
                    me,
                    customer,
                    &target,
                    &again,
                    amount,
                    Op::Redeem,
                    business,
                    false,
                )
                .await?;
            }
        }
    }
    if s.rng.chance(VIEW_WALLET) {
        ops::my_coupons(user, ctx, me, customer).await?;
    }
    Ok(())
}
