//! Mutant of the refund (service/refund.rs): D4, the seed's refund to the user AND to stock.

use uuid::Uuid;

use crate::{
    CouponEngine, CouponStatus, EngineError, EngineResult, RefundPolicy, Variant,
    domain::ids::UserId, service::RefundReceipt, store::postgres,
};

/// D4: the coupon goes back to the user AND, under `return_to_stock`, its stock is
/// returned too.
pub(crate) async fn refund(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> Option<EngineResult<RefundReceipt>> {
    if e.config().variant != Variant::D4 {
        return None;
    }
    Some(refund_both(e, coupon_id, user_id, order_id).await)
}

async fn refund_both(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> EngineResult<RefundReceipt> {
    // Each statement autocommits: there is no transaction to keep them together.
    let template_id = postgres::restore_to_user(e.pool(), coupon_id, user_id, order_id)
        .await?
        .ok_or_else(|| {
            EngineError::InvalidState("coupon state is abnormal; cannot refund".into())
        })?;
    postgres::mark_use_undone(e.pool(), coupon_id, order_id).await?;
    let t = e.template(template_id).await?;
    if t.spec.refund_policy == RefundPolicy::ReturnToStock {
        // Both stores get the stock back, while the coupon stays live.
        postgres::return_to_stock(&mut *e.pool().acquire().await?, template_id).await?;
        e.redis().give_stock(template_id).await?;
    }
    Ok(RefundReceipt {
        coupon_id,
        status: CouponStatus::Issued,
        replay: false,
    })
}
