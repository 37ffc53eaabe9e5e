//! Checkout (锁券): the order service locks a coupon when an order is placed, redeems it
//! when the order is paid (`redeem.rs` accepts a coupon locked by the same order), and
//! releases it when the order is cancelled; a lock whose order never paid lapses at its TTL
//! and the sweep gives the coupon back (docs/ARCHITECTURE.md, "Checkout").
//!
//! Every step is one conditional UPDATE in Postgres, so a coupon raced onto several orders
//! is locked by exactly one of them (the row lock serializes the UPDATEs; the losers read
//! `locked` and are refused). No Redis lock is needed and none is taken. Lock and release
//! are idempotent on the order id, like redeem.

use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    domain::ids::{UserId, validate_order_id},
    error::{EngineError, EngineResult},
    store::postgres::{self, CheckoutState},
};

/// The longest lock an order may ask for: a day (an order unpaid for longer is abandoned).
pub const MAX_CHECKOUT_LOCK: Duration = Duration::from_secs(24 * 3600);

/// Lapsed locks released per UPDATE.
const SWEEP_BATCH: i64 = 1000;

/// A lock that stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckoutLock {
    /// The coupon locked.
    pub coupon_id: Uuid,
    /// The order holding it.
    pub order_id: String,
    /// When the lock lapses unless the order is paid or cancelled first.
    #[serde(with = "time::serde::rfc3339")]
    pub locked_until: OffsetDateTime,
    /// True when this answers a repeat of an earlier successful lock by the same order.
    pub replay: bool,
}

/// A release that stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Release {
    /// The coupon released.
    pub coupon_id: Uuid,
    /// False when the order held no lock (already released, or lapsed and swept): the
    /// coupon is not the order's either way, which is what a cancel needs.
    pub released: bool,
}

impl CouponEngine {
    /// Locks `coupon_id` of `user_id` for `order_id` for `ttl` (the engine's
    /// `checkout_lock_ttl` when None). Locking again with the same order answers the same
    /// lock; a coupon held by another order is refused with `locked` or `already_used`.
    ///
    /// Answers within the engine's deadline; past it, `unavailable` with the outcome
    /// unknown (the order id makes the retry safe).
    pub async fn lock_for_order(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        ttl: Option<Duration>,
    ) -> EngineResult<CheckoutLock> {
        self.within_deadline(async {
            validate_order_id(order_id)?;
            let ttl = ttl.unwrap_or(self.inner.config.checkout_lock_ttl);
            if ttl.is_zero() || ttl > MAX_CHECKOUT_LOCK {
                return Err(EngineError::invalid(format!(
                    "a lock lasts between 1 s and {} s",
                    MAX_CHECKOUT_LOCK.as_secs()
                )));
            }
            let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
            #[cfg(feature = "mutants")]
            if let Some(r) = crate::service::mutants::lock(
                self,
                &crate::service::mutants::Lock {
                    coupon_id,
                    user_id,
                    order_id,
                    ttl_ms,
                },
            )
            .await
            {
                return r;
            }
            self.after_pending_claims(|| self.lock_once(coupon_id, user_id, order_id, ttl_ms))
                .await
        })
        .await
    }

    async fn lock_once(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        ttl_ms: i64,
    ) -> EngineResult<CheckoutLock> {
        // Re-run when the coupon changed between the UPDATE and the diagnosis (a lock that
        // lapsed, a release in between).
        for _ in 0..3 {
            let locked =
                postgres::lock_for_order(&self.inner.pg, coupon_id, user_id, order_id, ttl_ms)
                    .await?;
            if let Some(locked_until) = locked {
                return Ok(CheckoutLock {
                    coupon_id,
                    order_id: order_id.to_owned(),
                    locked_until,
                    replay: false,
                });
            }
            let state = self.checkout_state(coupon_id, user_id).await?;
            if let Some(lock) = explain_lock_refusal(&state, coupon_id, order_id)? {
                return Ok(lock);
            }
        }
        Err(EngineError::Unavailable(
            "the coupon kept changing during the lock; retry".into(),
        ))
    }

    /// Releases the lock `order_id` holds on `coupon_id` of `user_id` (the order was
    /// cancelled). Idempotent: releasing again, or after the lock lapsed, answers
    /// `released: false`. A coupon the order already paid with, or held by another order,
    /// is refused.
    pub async fn release_order_lock(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
    ) -> EngineResult<Release> {
        self.within_deadline(async {
            validate_order_id(order_id)?;
            #[cfg(feature = "mutants")]
            if let Some(r) = crate::service::mutants::release(self, coupon_id, user_id).await {
                return r;
            }
            self.after_pending_claims(|| self.release_once(coupon_id, user_id, order_id))
                .await
        })
        .await
    }

    async fn release_once(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
    ) -> EngineResult<Release> {
        if postgres::release_order_lock(&self.inner.pg, coupon_id, user_id, order_id).await? {
            return Ok(Release {
                coupon_id,
                released: true,
            });
        }
        let state = self.checkout_state(coupon_id, user_id).await?;
        let mine = state.order_id.as_deref() == Some(order_id);
        match state.status.as_str() {
            "used" if mine => Err(EngineError::InvalidState(
                "the order already paid with this coupon: refund it instead".into(),
            )),
            "used" => Err(EngineError::AlreadyUsed),
            "locked" if !mine && !state.lapsed => Err(EngineError::Locked),
            // Issued, expired, revoked, or a lapsed lock of another order: this order
            // holds nothing, which is what its cancel asked for.
            _ => Ok(Release {
                coupon_id,
                released: false,
            }),
        }
    }

    /// Releases every lapsed checkout lock (orders that never paid); returns how many.
    pub async fn release_lapsed_locks(&self) -> EngineResult<u64> {
        let mut total = 0;
        loop {
            let n = postgres::release_lapsed_locks(&self.inner.pg, SWEEP_BATCH).await?;
            total += n;
            if n < SWEEP_BATCH as u64 {
                if total > 0 {
                    tracing::info!(released = total, "lapsed checkout locks released");
                }
                return Ok(total);
            }
        }
    }

    /// The coupon as checkout sees it, refused when it is not `user_id`'s.
    async fn checkout_state(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
    ) -> EngineResult<CheckoutState> {
        let state = postgres::checkout_state(&self.inner.pg, coupon_id)
            .await?
            .ok_or(EngineError::NotFound("coupon"))?;
        if state.user_id != user_id.as_str() {
            return Err(EngineError::NotOwner);
        }
        Ok(state)
    }
}

/// Why a lock matched nothing: a replay of this order's own lock (Some), a refusal, or
/// Ok(None) when the coupon is lockable now (it changed after the UPDATE looked).
fn explain_lock_refusal(
    state: &CheckoutState,
    coupon_id: Uuid,
    order_id: &str,
) -> EngineResult<Option<CheckoutLock>> {
    let mine = state.order_id.as_deref() == Some(order_id);
    match (state.status.as_str(), state.locked_until) {
        ("locked", Some(until)) if mine && !state.lapsed => Ok(Some(CheckoutLock {
            coupon_id,
            order_id: order_id.to_owned(),
            locked_until: until,
            replay: true,
        })),
        ("locked", _) if !state.lapsed => Err(EngineError::Locked),
        ("used", _) if mine => Err(EngineError::InvalidState(
            "the order already paid with this coupon".into(),
        )),
        ("used", _) => Err(EngineError::AlreadyUsed),
        ("expired", _) => Err(EngineError::Expired),
        ("revoked", _) => Err(EngineError::InvalidState(
            "the coupon was revoked by a refund".into(),
        )),
        _ if state.past => Err(EngineError::Expired),
        _ if state.early => Err(EngineError::InvalidState(
            "the coupon is not valid yet".into(),
        )),
        _ => Ok(None),
    }
}
