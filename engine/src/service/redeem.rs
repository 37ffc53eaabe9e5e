//! Redeem (核销): optional token lock, then one transaction of the conditional UPDATE and the
//! use-log INSERT (docs/ARCHITECTURE.md, "Redeem and refund").

use std::time::Duration;

use serde::Serialize;
use sqlx::Row;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    domain::{
        discount::{Discount, DiscountKind},
        ids::{validate_order_id, validate_user_id},
    },
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
    store::postgres::is_unique_violation,
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
    pub async fn redeem(
        &self,
        coupon_id: Uuid,
        user_id: &str,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Redemption> {
        validate_user_id(user_id)?;
        validate_order_id(order_id)?;
        if order_amount < 0 {
            return Err(EngineError::invalid("order_amount must be >= 0"));
        }
        #[cfg(feature = "mutants")]
        if let Some(r) =
            crate::mutants::redeem(self, coupon_id, user_id, order_id, order_amount).await
        {
            return r;
        }
        let first = self
            .redeem_locked(coupon_id, user_id, order_id, order_amount)
            .await;
        if matches!(first, Err(EngineError::NotFound(_))) && self.wrote_pending_claims().await? {
            // Async mode: the coupon may be an acknowledged claim still in the persister's
            // queue; read-your-writes holds once it is written.
            return self
                .redeem_locked(coupon_id, user_id, order_id, order_amount)
                .await;
        }
        first
    }

    async fn redeem_locked(
        &self,
        coupon_id: Uuid,
        user_id: &str,
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
        user_id: &str,
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
        user_id: &str,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Option<Redemption>> {
        let mut tx = self.inner.pg.begin().await?;
        let row = sqlx::query(
            "UPDATE user_coupon c SET status = 'used', order_id = $3, used_at = now() \
             FROM coupon_template t \
             WHERE c.id = $1 AND c.user_id = $2 AND c.status = 'issued' \
               AND now() >= c.valid_from AND now() < c.valid_until \
               AND t.id = c.template_id AND $4 >= COALESCE(t.min_order_amount, 0) \
             RETURNING t.discount_kind, t.discount_amount, t.discount_percent, \
                       t.min_order_amount, t.max_discount",
        )
        .bind(coupon_id)
        .bind(user_id)
        .bind(order_id)
        .bind(order_amount)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            drop(tx);
            return self
                .diagnose_redeem(coupon_id, user_id, order_id, order_amount)
                .await;
        };
        let discount = discount_from_row(&row)?.compute(order_amount)?;
        self.inner
            .failpoints
            .hit(Failpoint::RedeemAfterUpdate)
            .await?;
        let logged = sqlx::query(
            "INSERT INTO coupon_use_log (coupon_id, order_id, user_id, order_amount, discount, used_at) \
             VALUES ($1, $2, $3, $4, $5, now())",
        )
        .bind(coupon_id)
        .bind(order_id)
        .bind(user_id)
        .bind(order_amount)
        .bind(discount)
        .execute(&mut *tx)
        .await;
        match logged {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e, "coupon_use_log_coupon_order_key") => {
                return Err(EngineError::InvalidState(
                    "this order already used this coupon and was refunded".into(),
                ));
            }
            Err(e) => return Err(e.into()),
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
        user_id: &str,
        order_id: &str,
        order_amount: i64,
    ) -> EngineResult<Option<Redemption>> {
        let row = sqlx::query(
            "SELECT c.user_id, c.status, c.order_id, now() >= c.valid_until AS past, \
                    now() < c.valid_from AS early, t.min_order_amount, l.discount \
             FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id \
             LEFT JOIN coupon_use_log l ON l.coupon_id = c.id AND l.order_id = $2 AND NOT l.undone \
             WHERE c.id = $1",
        )
        .bind(coupon_id)
        .bind(order_id)
        .fetch_optional(&self.inner.pg)
        .await?
        .ok_or(EngineError::NotFound("coupon"))?;
        let owner: String = row.try_get("user_id")?;
        if owner != user_id {
            return Err(EngineError::NotOwner);
        }
        let status: String = row.try_get("status")?;
        let used_by: Option<String> = row.try_get("order_id")?;
        let logged: Option<i64> = row.try_get("discount")?;
        match status.as_str() {
            "used" if used_by.as_deref() == Some(order_id) => Ok(Some(Redemption {
                coupon_id,
                order_id: order_id.to_owned(),
                discount: logged.unwrap_or(0),
                replay: true,
            })),
            "used" => Err(EngineError::AlreadyUsed),
            "expired" => Err(EngineError::Expired),
            "revoked" => Err(EngineError::InvalidState(
                "the coupon was revoked by a refund".into(),
            )),
            _ if row.try_get::<bool, _>("past")? => Err(EngineError::Expired),
            _ if row.try_get::<bool, _>("early")? => Err(EngineError::InvalidState(
                "the coupon is not valid yet".into(),
            )),
            _ => match row.try_get::<Option<i64>, _>("min_order_amount")? {
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

fn discount_from_row(row: &sqlx::postgres::PgRow) -> EngineResult<Discount> {
    let kind: String = row.try_get("discount_kind")?;
    Ok(Discount {
        kind: DiscountKind::parse(&kind)
            .ok_or_else(|| EngineError::Unavailable("unknown discount kind stored".into()))?,
        amount: row.try_get("discount_amount")?,
        percent: row.try_get("discount_percent")?,
        min_order_amount: row.try_get("min_order_amount")?,
        max_discount: row.try_get("max_discount")?,
    })
}
