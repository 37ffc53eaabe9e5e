//! `lifecycle` (the claim-redeem-refund life cycle): claim → redeem with a random order →
//! duplicate submissions (same ids: same answer), a clashing order (must get 409
//! `already_used`), cross-user attempts on the coupon (must get 403 `not_owner`), some
//! refunds (policy `return_to_user` or `return_to_stock`, alternately) and re-redeems.

use goose::prelude::*;

use super::{
    Ctx, Session,
    call::Transport,
    ops::{self, CouponRef, Request, Sender},
};
use crate::{
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
    user: &mut impl Transport,
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

/// A redeem may be refused for this without being wrong: the amount is random.
const BUSINESS: &[&str] = &["below_min_amount"];

/// A random order amount for `template` (sometimes below its minimum, if it has one).
fn order_amount(rng: &mut Rng, template: &TemplateInfo) -> i64 {
    match template.min_order_amount {
        Some(min) => rng.range(min / 5, min * 4),
        None => rng.range(1_000, 100_000),
    }
}

/// Refunds the redeemed coupon; now and then repeats the refund, and after a refund back
/// to the user redeems it again with a fourth order.
async fn refund(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
    me: Sender<'_>,
    template: &TemplateInfo,
    target: &CouponRef,
    first: &str,
) -> TransactionResult {
    let refunded = ops::send(user, ctx, me, Request::refund(target, first)).await?;
    if refunded.is_ok() {
        if s.rng.chance(ctx.duplicate_rate) {
            ops::send(user, ctx, me, Request::refund(target, first).repeated()).await?;
        }
        if template.refund_policy == RefundPolicy::ReturnToUser && s.rng.chance(REDEEM_AGAIN) {
            let again = format!("o{}-{}-{}-4", ctx.tag, s.idx, s.iter);
            let amount = order_amount(&mut s.rng, template);
            let again = Request::redeem(target, &again, amount).expecting(BUSINESS);
            ops::send(user, ctx, me, again).await?;
        }
    }
    Ok(())
}

/// Claim, redeem and maybe refund one coupon of `template` as shopper `n`.
pub(crate) async fn journey(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
    n: usize,
    customer: &Customer,
    template: &TemplateInfo,
) -> TransactionResult {
    let me = Sender {
        goose_user: s.idx,
        customer,
    };
    let request_id = format!("{}-{}-{}", ctx.tag, s.idx, s.iter);
    let claim = || Request::claim(template.id, &request_id);
    let claimed = ops::send(user, ctx, me, claim()).await?;
    let Some(coupon) = claimed.coupon() else {
        return Ok(());
    };
    if s.rng.chance(ctx.duplicate_rate) {
        ops::send(user, ctx, me, claim().repeated()).await?;
    }
    let target = CouponRef {
        coupon,
        template: template.id,
    };
    let (idx, iter) = (s.idx, s.iter);
    let order = |k: u32| format!("o{}-{idx}-{iter}-{k}", ctx.tag);
    let first = order(1);
    let amount = order_amount(&mut s.rng, template);
    let redeemed = ops::send(
        user,
        ctx,
        me,
        Request::redeem(&target, &first, amount).expecting(BUSINESS),
    )
    .await?;
    if s.rng.chance(CROSS_USER) {
        let intruder = Sender {
            goose_user: s.idx,
            customer: ctx.intruder(n, &mut s.rng),
        };
        let theirs = order(3);
        let attempt = Request::redeem(&target, &theirs, amount)
            .by_intruder()
            .expecting(&["not_owner"]);
        ops::send(user, ctx, intruder, attempt).await?;
    }
    if !redeemed.is_ok() {
        return Ok(());
    }
    if s.rng.chance(ctx.duplicate_rate) {
        ops::send(
            user,
            ctx,
            me,
            Request::redeem(&target, &first, amount).repeated(),
        )
        .await?;
    }
    if s.rng.chance(CLASH) {
        let other = order(2);
        let clash = Request::redeem(&target, &other, amount).expecting(&["already_used"]);
        ops::send(user, ctx, me, clash).await?;
    }
    if s.rng.chance(CROSS_USER) {
        let intruder = Sender {
            goose_user: s.idx,
            customer: ctx.intruder(n, &mut s.rng),
        };
        let attempt = Request::refund(&target, &first)
            .by_intruder()
            .expecting(&["not_owner"]);
        ops::send(user, ctx, intruder, attempt).await?;
    }
    if s.rng.chance(REFUND) {
        refund(user, ctx, s, me, template, &target, &first).await?;
    }
    if s.rng.chance(VIEW_WALLET) {
        ops::my_coupons(user, ctx, me).await?;
    }
    Ok(())
}
