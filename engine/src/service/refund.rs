//! Refund (退券): one transaction restores the coupon per the template's policy and marks the
//! use-log row undone; `return_to_stock` also writes an outbox row that the relay applies to
//! Redis exactly once. Never both (defect D4; docs/ARCHITECTURE.md, "Redeem and refund").

use serde::Serialize;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    domain::{
        coupon::CouponStatus,
        ids::{UserId, validate_order_id},
    },
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
    store::postgres,
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
    ///
    /// Answers within the engine's deadline; past it, `unavailable` with the outcome
    /// unknown (the order id makes the retry safe).
    pub async fn refund(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        self.within_deadline(async {
            validate_order_id(order_id)?;
            #[cfg(feature = "mutants")]
            if let Some(r) =
                crate::service::mutants::refund(self, coupon_id, user_id, order_id).await
            {
                return r;
            }
            self.after_pending_claims(|| self.refund_once(coupon_id, user_id, order_id))
                .await
        })
        .await
    }

    async fn refund_once(
        &self,
        coupon_id: Uuid,
        user_id: &UserId,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        let mut tx = self.inner.pg.begin().await?;
        let restored = postgres::restore_used(&mut *tx, coupon_id, user_id, order_id).await?;
        let Some((template_id, status)) = restored else {
            drop(tx);
            return self.diagnose_refund(coupon_id, user_id, order_id).await;
        };
        if postgres::mark_use_undone(&mut *tx, coupon_id, order_id).await? != 1 {
            return Err(EngineError::InvalidState(
                "the coupon's use log does not match its order".into(),
            ));
        }
        if status == CouponStatus::Revoked {
            // In this transaction: the counter row waits for a rebuild in progress, so the
            // refund cannot slip between a rebuild's count and its outbox settle.
            postgres::return_to_stock(&mut tx, template_id).await?;
            postgres::insert_return_stock(&mut tx, template_id, coupon_id, user_id).await?;
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
        user_id: &UserId,
        order_id: &str,
    ) -> EngineResult<RefundReceipt> {
        let state = postgres::refund_state(&self.inner.pg, coupon_id, order_id)
            .await?
            .ok_or(EngineError::NotFound("coupon"))?;
        if state.user_id != user_id.as_str() {
            return Err(EngineError::NotOwner);
        }
        let status = CouponStatus::parse(&state.status)
            .ok_or_else(|| EngineError::Unavailable("unknown coupon status".into()))?;
        if state.refunded {
            // The answer the first refund gave, whatever happened to the coupon since.
            return Ok(RefundReceipt {
                coupon_id,
                status: if state.refund_policy == "return_to_stock" {
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
