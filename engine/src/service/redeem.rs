//! Redeem (核销): optional token lock, then one transaction of the conditional UPDATE and the
//! use-log INSERT (docs/ARCHITECTURE.md, "Redeem and refund").

use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    domain::ids::{UserId, validate_order_id},
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
    store::postgres::{self, OnConflict, UseRecord},
};

/// A redemption that stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redemption {
    /// The coupon used.
    pub coupon_id: Uuid,
    /// The order it was used for.
    pub order_id: String,
    /// Amount taken off the order (minor units).
    pub discount: i64,
    /// True when this answers a repeat of an earlier successful redemption.
    pub replay: bool,
}

impl CouponEngine {
    /// Redeems `coupon_id` of `user_id` for `order_id`. Redeeming again with the same order is
    /// an idempotent success; any other conflict is refused with a precise error.
    ///
    /// Answers within the engine's deadline; past it, `unavailable` with the outcome
    /// unknown (the order id makes the retry safe).
    pub async fn redeem(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Redemption> {
        self.within_deadline(async {
            validate_order_id(order_id)?;
            if order_amount < 0 {
                return Err(EngineError::invalid("order_amount must be >= 0"));
            }
            #[cfg(feature = "mutants")]
            if let Some(r) = crate::service::mutants::redeem(
                self,
                &crate::service::mutants::Redeem {
                    coupon_id,
                    user_id,
                    order_id,
                    order_amount,
                },
            )
            .await
            {
                return r;
            }
            self.after_pending_claims(|| {
                self.redeem_locked(coupon_id, user_id, order_id, order_amount)
            })
            .await
        })
        .await
    }

    async fn redeem_locked(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Redemption> {
        if !self.inner.config.redeem_lock {
            return self
                .redeem_once(coupon_id, user_id, order_id, order_amount)
                .await;
        }
        let token = Uuid::new_v4().simple().to_string();
        self.acquire_lock(coupon_id, &token).await?;
        let result = self
            .redeem_once(coupon_id, user_id, order_id, order_amount)
            .await;
        // Released on every path, by token only; the TTL is the backstop if this fails.
        if let Err(e) = self.inner.redis.unlock(coupon_id, &token).await {
            tracing::warn!(error = %e, %coupon_id, "redeem lock not released; its TTL will");
        }
        result
    }

    async fn acquire_lock(&self, coupon_id: Uuid, token: &str) -> EngineResult<()> {
        let cfg = &self.inner.config;
        let deadline = tokio::time::Instant::now() + cfg.lock_wait;
        let mut pause = Duration::from_millis(2);
        loop {
            if self
                .inner
                .redis
                .lock(coupon_id, token, cfg.lock_ttl)
                .await?
            {
                return Ok(());
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(EngineError::Busy);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// One redemption; re-run when the coupon changed between the UPDATE and the diagnosis
    /// (e.g. a concurrent refund, or an async claim persisted in between).
    async fn redeem_once(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Redemption> {
        for _ in 0..3 {
            if let Some(r) = self
                .redeem_attempt(coupon_id, user_id, order_id, order_amount)
                .await?
            {
                return Ok(r);
            }
        }
        Err(EngineError::Unavailable(
            "the coupon kept changing during redemption; retry".into(),
        ))
    }

    async fn redeem_attempt(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Option<Redemption>> {
        let mut tx = self.inner.pg.begin().await?;
        let marked =
            postgres::mark_used(&mut *tx, coupon_id, user_id, order_id, order_amount).await?;
        let Some(discount) = marked else {
            drop(tx);
            return self
                .diagnose_redeem(coupon_id, user_id, order_id, order_amount)
                .await;
        };
        #[cfg(feature = "mutants")]
        let uncapped = crate::service::mutants::deduction(self, &discount);
        let discount = discount.compute(order_amount)?;
        #[cfg(feature = "mutants")]
        let discount = uncapped.unwrap_or(discount);
        self.inner
            .failpoints
            .hit(Failpoint::RedeemAfterUpdate)
            .await?;
        let used = UseRecord {
            coupon_id,
            order_id,
            user_id,
            order_amount,
            discount,
        };
        match postgres::log_use(&mut *tx, &used, OnConflict::Refuse).await {
            Ok(()) => {}
            Err(e) if postgres::is_order_logged(&e) => {
                return Err(EngineError::InvalidState(
                    "this order already used this coupon and was refunded".into(),
                ));
            }
            Err(e) => return Err(e),
        }
        tx.commit().await?;
        Ok(Some(Redemption {
            coupon_id,
            order_id: order_id.to_owned(),
            discount,
            replay: false,
        }))
    }

    /// Explains why the conditional UPDATE matched nothing.
    async fn diagnose_redeem(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Option<Redemption>> {
        let state = postgres::redeem_state(&self.inner.pg, coupon_id, order_id)
            .await?
            .ok_or(EngineError::NotFound("coupon"))?;
        if state.user_id != user_id.as_str() {
            return Err(EngineError::NotOwner);
        }
        let status = state.status.as_str();
        let used_by = state.order_id.as_deref();
        match status {
            "locked" if used_by != Some(order_id) && !state.lapsed => Err(EngineError::Locked),
            "used" if used_by == Some(order_id) => Ok(Some(Redemption {
                coupon_id,
                order_id: order_id.to_owned(),
                discount: state.discount.unwrap_or(0),
                replay: true,
            })),
            "used" => Err(EngineError::AlreadyUsed),
            "expired" => Err(EngineError::Expired),
            "revoked" => Err(EngineError::InvalidState(
                "the coupon was revoked by a refund".into(),
            )),
            _ if state.past => Err(EngineError::Expired),
            _ if state.early => Err(EngineError::InvalidState(
                "the coupon is not valid yet".into(),
            )),
            _ => match state.min_order_amount {
                Some(min) if order_amount < min => Err(EngineError::BelowMinAmount {
                    amount: order_amount,
                    min,
                }),
                // Redeemable now: it changed after the UPDATE looked at it.
                _ => Ok(None),
            },
        }
    }
}
