//! Mutants of the redeem (service/redeem.rs): D2 and D3, the seed's broken redemptions, and
//! mall #1002's uncapped deduction.

use std::time::Duration;

use uuid::Uuid;

use crate::{
    CouponEngine, EngineError, EngineResult, Variant,
    domain::discount::{Discount, DiscountKind},
    domain::ids::UserId,
    failpoint::Failpoint,
    service::Redemption,
    store::postgres::{self, OnConflict, UsableIf, UseRecord},
};

/// D2 and D3: the redemption, wholesale.
pub(crate) async fn redeem(e: &CouponEngine, r: &Redeem<'_>) -> Option<EngineResult<Redemption>> {
    match e.config().variant {
        Variant::D2 => Some(redeem_d2(e, r).await),
        Variant::D3 => Some(redeem_d3(e, r).await),
        _ => None,
    }
}

/// What is redeemed.
pub(crate) struct Redeem<'a> {
    pub coupon_id: Uuid,
    pub user_id: &'a UserId,
    pub order_id: &'a str,
    pub order_amount: i64,
}

impl<'a> Redeem<'a> {
    fn logged(&self, discount: i64) -> UseRecord<'a> {
        UseRecord {
            coupon_id: self.coupon_id,
            order_id: self.order_id,
            user_id: self.user_id,
            order_amount: self.order_amount,
            discount,
        }
    }

    fn redeemed(&self, discount: i64) -> Redemption {
        Redemption {
            coupon_id: self.coupon_id,
            order_id: self.order_id.to_owned(),
            discount,
            replay: false,
        }
    }
}

/// The seed's lock: the same token for everyone, so anyone may release it.
async fn seed_lock(e: &CouponEngine, coupon_id: Uuid) -> EngineResult<()> {
    for _ in 0..100 {
        if e.redis().lock(coupon_id, "1", e.config().lock_ttl).await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(EngineError::Busy)
}

async fn discount_of(e: &CouponEngine, r: &Redeem<'_>) -> EngineResult<i64> {
    let c = e
        .coupon(r.coupon_id)
        .await?
        .ok_or(EngineError::NotFound("coupon"))?;
    let t = e.template(c.template_id).await?;
    t.spec.discount.compute(r.order_amount)
}

async fn redeem_d2(e: &CouponEngine, r: &Redeem<'_>) -> EngineResult<Redemption> {
    seed_lock(e, r.coupon_id).await?;
    let result = async {
        let discount = discount_of(e, r).await?;
        let mut tx = e.pool().begin().await?;
        let (coupon, user, order) = (r.coupon_id, r.user_id, r.order_id);
        let n = postgres::mark_used_if(&mut *tx, UsableIf::NotRevoked, coupon, user, order).await?;
        if n == 0 {
            return Err(EngineError::InvalidState("coupon state is abnormal".into()));
        }
        postgres::log_use(&mut *tx, &r.logged(discount), OnConflict::Ignore).await?;
        tx.commit().await?;
        Ok(r.redeemed(discount))
    }
    .await;
    e.redis().force_unlock(r.coupon_id).await?;
    result
}

async fn redeem_d3(e: &CouponEngine, r: &Redeem<'_>) -> EngineResult<Redemption> {
    seed_lock(e, r.coupon_id).await?;
    let discount = discount_of(e, r).await?;
    // Autocommit UPDATE: nothing rolls it back if the log insert fails.
    let (coupon, user, order) = (r.coupon_id, r.user_id, r.order_id);
    let n = postgres::mark_used_if(e.pool(), UsableIf::Issued, coupon, user, order).await?;
    if n == 0 {
        // Early return: the lock leaks until its TTL.
        return Err(EngineError::InvalidState(
            "coupon state is abnormal or used".into(),
        ));
    }
    e.failpoints().hit(Failpoint::RedeemAfterUpdate).await?;
    postgres::log_use(e.pool(), &r.logged(discount), OnConflict::Refuse).await?;
    e.redis().force_unlock(r.coupon_id).await?;
    Ok(r.redeemed(discount))
}

/// mall #1002: the deduction the template's discount gives, not capped at the order amount
/// (a fixed discount larger than the order stores a negative amount to pay). Replaces the
/// engine's capped `compute` inside its own redemption, so nothing else differs.
pub(crate) fn deduction(e: &CouponEngine, discount: &Discount) -> Option<i64> {
    if e.config().variant != Variant::Mall1002 {
        return None;
    }
    match discount.kind {
        DiscountKind::Fixed | DiscountKind::Threshold => discount.amount,
        DiscountKind::Percent => None,
    }
}
