//! Mutants of checkout (service/checkout.rs), from bugs shipped in real coupon systems:
//! mall #1003's check-then-lock and two of oneCoupon's settlement defects.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    CouponEngine, EngineError, EngineResult, Variant,
    domain::ids::UserId,
    service::{CheckoutLock, Release},
    store::postgres,
};

/// mall #1003 and oneCoupon's unchecked LOCKING update: the lock, wholesale.
pub(crate) async fn lock(e: &CouponEngine, lock: &Lock<'_>) -> Option<EngineResult<CheckoutLock>> {
    match e.config().variant {
        Variant::Mall1003 => Some(check_then_lock(e, lock).await),
        Variant::OneCouponLockUnchecked => Some(lock_unchecked(e, lock).await),
        _ => None,
    }
}

/// oneCoupon: the cancel answers success and releases nothing.
pub(crate) async fn release(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &UserId,
) -> Option<EngineResult<Release>> {
    if e.config().variant != Variant::OneCouponNoRelease {
        return None;
    }
    // The owner is still checked, so the mutant differs from the engine only in its defect.
    Some(match postgres::checkout_state(e.pool(), coupon_id).await {
        Ok(Some(s)) if s.user_id == user_id.as_str() => Ok(Release {
            coupon_id,
            released: true,
        }),
        Ok(Some(_)) => Err(EngineError::NotOwner),
        Ok(None) => Err(EngineError::NotFound("coupon")),
        Err(err) => Err(err),
    })
}

/// What is locked.
pub(crate) struct Lock<'a> {
    pub coupon_id: Uuid,
    pub user_id: &'a UserId,
    pub order_id: &'a str,
    pub ttl_ms: i64,
}

impl Lock<'_> {
    fn locked(&self, locked_until: OffsetDateTime) -> CheckoutLock {
        CheckoutLock {
            coupon_id: self.coupon_id,
            order_id: self.order_id.to_owned(),
            locked_until,
            replay: false,
        }
    }
}

/// mall #1003: read the coupon, and if it is free, lock it with an UPDATE that does not
/// check again; two orders that read it side by side both lock it.
async fn check_then_lock(e: &CouponEngine, l: &Lock<'_>) -> EngineResult<CheckoutLock> {
    let state = postgres::checkout_state(e.pool(), l.coupon_id)
        .await?
        .ok_or(EngineError::NotFound("coupon"))?;
    if state.user_id != l.user_id.as_str() {
        return Err(EngineError::NotOwner);
    }
    let free = state.status == "issued" || state.lapsed;
    if !free && state.order_id.as_deref() != Some(l.order_id) {
        return Err(if state.status == "locked" {
            EngineError::Locked
        } else {
            EngineError::InvalidState(format!("the coupon is {}", state.status))
        });
    }
    // The order service's own work between its check and its write (the order row, the
    // price), which is what lets a second order in.
    tokio::task::yield_now().await;
    let until = postgres::lock_unguarded(e.pool(), l.coupon_id, l.order_id, l.ttl_ms).await?;
    Ok(l.locked(until))
}

/// oneCoupon: the guarded UPDATE, its row count ignored: success whatever it matched.
async fn lock_unchecked(e: &CouponEngine, l: &Lock<'_>) -> EngineResult<CheckoutLock> {
    let (coupon, user, order) = (l.coupon_id, l.user_id, l.order_id);
    let until = postgres::lock_for_order(e.pool(), coupon, user, order, l.ttl_ms).await?;
    let until =
        until.unwrap_or_else(|| OffsetDateTime::now_utc() + time::Duration::milliseconds(l.ttl_ms));
    Ok(l.locked(until))
}
