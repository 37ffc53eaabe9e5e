//! Refund (退券): one transaction restores the coupon per the template's policy and marks the
//! use-log row undone; `return_to_stock` also writes an outbox row that the relay applies to
//! Redis exactly once. Never both (defect D4; docs/ARCHITECTURE.md, "Redeem and refund").

use serde::Serialize;
use sqlx::Row;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    domain::{
        coupon::CouponStatus,
        ids::{validate_order_id, validate_user_id},
    },
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
};

/// A refund that stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundReceipt {
    /// The refunded coupon.
    pub coupon_id: Uuid,
    /// Its status now: `issued` (return_to_user) or `revoked` (return_to_stock).
    pub status: CouponStatus,
    /// True when this answers a repeat of an earlier successful refund.
    pub replay: bool,
}

impl CouponEngine {
    /// Refunds the redemption of `coupon_id` by `order_id`.
    pub async fn refund(
        &self,
        coupon_id: Uuid,
        user_id: &str,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        validate_user_id(user_id)?;
        validate_order_id(order_id)?;
        #[cfg(feature = "mutants")]
        if let Some(r) = crate::mutants::refund(self, coupon_id, user_id, order_id).await {
            return r;
        }
        let first = self.refund_once(coupon_id, user_id, order_id).await;
        if matches!(first, Err(EngineError::NotFound(_))) && self.wrote_pending_claims().await? {
            // Async mode: see `redeem`.
            return self.refund_once(coupon_id, user_id, order_id).await;
        }
        first
    }

    async fn refund_once(
        &self,
        coupon_id: Uuid,
        user_id: &str,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        let mut tx = self.inner.pg.begin().await?;
        let row = sqlx::query(
            "UPDATE user_coupon c SET \
               status = CASE WHEN t.refund_policy = 'return_to_stock' THEN 'revoked' ELSE 'issued' END, \
               order_id = NULL, used_at = NULL, \
               valid_until = CASE WHEN t.refund_policy = 'return_to_user' AND t.extend_validity_on_refund \
                                  THEN c.valid_until + (now() - c.used_at) ELSE c.valid_until END \
             FROM coupon_template t \
             WHERE c.id = $1 AND c.user_id = $2 AND c.status = 'used' AND c.order_id = $3 \
               AND t.id = c.template_id \
             RETURNING c.template_id, c.status",
        )
        .bind(coupon_id)
        .bind(user_id)
        .bind(order_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            drop(tx);
            return self.diagnose_refund(coupon_id, user_id, order_id).await;
        };
        let template_id: Uuid = row.try_get("template_id")?;
        let status: String = row.try_get("status")?;
        let status = CouponStatus::parse(&status)
            .ok_or_else(|| EngineError::Unavailable("unknown coupon status".into()))?;
        // clock_timestamp(), not now(): a refund that began before the redemption it undoes
        // waited for that redemption's row lock, so its transaction started earlier than the
        // use it records undoing (the auditor's I5 saw "refunded before it was used").
        let undone = sqlx::query(
            "UPDATE coupon_use_log SET undone = true, undone_at = clock_timestamp() \
             WHERE coupon_id = $1 AND order_id = $2 AND NOT undone",
        )
        .bind(coupon_id)
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
        if undone.rows_affected() != 1 {
            return Err(EngineError::InvalidState(
                "the coupon's use log does not match its order".into(),
            ));
        }
        if status == CouponStatus::Revoked {
            // In this transaction: the counter row waits for a rebuild in progress, so the
            // refund cannot slip between a rebuild's count and its outbox settle.
            crate::store::postgres::return_to_stock(&mut tx, template_id).await?;
            sqlx::query(
                "INSERT INTO stock_outbox (template_id, coupon_id, user_id, kind) \
                 VALUES ($1, $2, $3, 'return_stock')",
            )
            .bind(template_id)
            .bind(coupon_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        if status == CouponStatus::Revoked {
            self.inner
                .failpoints
                .hit(Failpoint::RefundAfterCommit)
                .await?;
            // Best effort now; the reconciler applies whatever this leaves behind.
            if let Err(e) = self.relay_outbox(template_id).await {
                tracing::warn!(error = %e, %template_id, "outbox left for the reconciler");
            }
        }
        Ok(RefundReceipt {
            coupon_id,
            status,
            replay: false,
        })
    }

    async fn diagnose_refund(
        &self,
        coupon_id: Uuid,
        user_id: &str,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        let row = sqlx::query(
            "SELECT c.user_id, c.status, c.order_id, t.refund_policy, \
                    EXISTS (SELECT 1 FROM coupon_use_log l \
                            WHERE l.coupon_id = c.id AND l.order_id = $2 AND l.undone) AS refunded \
             FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id WHERE c.id = $1",
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
        let status = CouponStatus::parse(&status)
            .ok_or_else(|| EngineError::Unavailable("unknown coupon status".into()))?;
        if row.try_get::<bool, _>("refunded")? {
            // The answer the first refund gave, whatever happened to the coupon since.
            let policy: String = row.try_get("refund_policy")?;
            return Ok(RefundReceipt {
                coupon_id,
                status: if policy == "return_to_stock" {
                    CouponStatus::Revoked
                } else {
                    CouponStatus::Issued
                },
                replay: true,
            });
        }
        Err(EngineError::InvalidState(match status {
            CouponStatus::Used => "the coupon is used by another order".into(),
            other => format!(
                "the coupon is {} and not used by this order",
                other.as_str()
            ),
        }))
    }
}
