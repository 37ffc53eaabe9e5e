//! The stock outbox relay: applies committed `return_to_stock` refunds to Redis exactly once.

use super::CouponEngine;
use crate::{
    domain::ids::TemplateId,
    error::EngineResult,
    store::{postgres, redis::OutboxApply},
};

/// Rows a relay pass locks at most.
const RELAY_BATCH: i64 = 500;

impl CouponEngine {
    /// Applies the template's unapplied outbox rows; returns how many were applied now.
    ///
    /// Runs under the template's shared advisory lock with the epoch read inside it, so a
    /// rebuild (exclusive lock) either sees the rows applied or settles them itself; the
    /// Redis applied-set makes a replay after a lost COMMIT harmless.
    pub async fn relay_outbox(&self, template_id: TemplateId) -> EngineResult<usize> {
        let mut applied = 0;
        loop {
            let mut tx = self.inner.pg.begin().await?;
            postgres::lock_template(&mut tx, template_id, false).await?;
            let epoch = postgres::epoch(&mut tx, template_id).await?;
            let rows = postgres::lock_outbox(&mut tx, template_id, RELAY_BATCH).await?;
            if rows.is_empty() {
                return Ok(applied);
            }
            let mut done = Vec::with_capacity(rows.len());
            for row in &rows {
                match self
                    .inner
                    .redis
                    .apply_outbox(template_id, row.id, &row.user_id, epoch)
                    .await?
                {
                    OutboxApply::Applied => {
                        applied += 1;
                        done.push(row.id);
                    }
                    OutboxApply::Duplicate => done.push(row.id),
                    // The next rebuild counts the revoked coupon and settles the row.
                    OutboxApply::Fenced | OutboxApply::NotInitialised => {}
                }
            }
            postgres::mark_outbox_applied(&mut tx, &done).await?;
            tx.commit().await?;
            if applied > 0 {
                self.stock_came_back(template_id);
            }
            if done.len() < rows.len() || (rows.len() as i64) < RELAY_BATCH {
                return Ok(applied);
            }
        }
    }
}
