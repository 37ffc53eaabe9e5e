//! Rebuild of a template's Redis state from Postgres (DESIGN §5.1 step 4), fenced against
//! late writers by the template epoch.

use uuid::Uuid;

use super::CouponEngine;
use crate::{error::EngineResult, store::postgres};

/// What a rebuild call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuilt {
    /// Redis state was rewritten under this new epoch.
    Epoch(i64),
    /// Another caller rebuilt it first; nothing was done.
    AlreadyInitialised,
}

impl CouponEngine {
    /// Rebuilds the template's Redis keys from Postgres if its stock key is absent.
    ///
    /// Holding the template's exclusive advisory lock, it bumps the epoch, counts coupons
    /// against stock and per user, settles unapplied outbox rows (the count already excludes
    /// revoked coupons) and writes Redis, all before commit. Persisting a claim takes the
    /// shared lock and checks the epoch, so a claim deducted in the lost Redis whose INSERT
    /// comes later is fenced instead of overselling.
    pub async fn rebuild(&self, template_id: Uuid) -> EngineResult<Rebuilt> {
        #[cfg(feature = "mutants")]
        if let Some(r) = crate::mutants::rebuild(self, template_id).await {
            return r;
        }
        let template = self.template(template_id).await?;
        let mut tx = self.inner.pg.begin().await?;
        postgres::lock_template(&mut tx, template_id, true).await?;
        if self.inner.redis.stock(template_id).await?.is_some() {
            return Ok(Rebuilt::AlreadyInitialised);
        }
        let epoch = postgres::bump_epoch(&mut tx, template_id).await?;
        let claimed = postgres::counted_per_user(&mut tx, template_id).await?;
        postgres::settle_outbox(&mut tx, template_id).await?;
        let counted: i64 = claimed.iter().map(|(_, n)| n).sum();
        let stock = template.spec.total_stock - counted;
        if stock < 0 {
            tracing::error!(%template_id, counted, total = template.spec.total_stock,
                "more coupons count against stock than exist: oversold");
        }
        let window_ms = self.inner.config.idempotency_ttl.as_millis() as i64;
        let recent = postgres::recent_claims(&mut tx, template_id, window_ms).await?;
        let now_ms = (Self::now().unix_timestamp_nanos() / 1_000_000) as i64;
        self.inner
            .redis
            .restore_requests(template_id, &recent, epoch, stock.max(0), now_ms)
            .await?;
        self.inner
            .redis
            .rebuild(template_id, stock.max(0), epoch, &claimed)
            .await?;
        tx.commit().await?;
        tracing::info!(%template_id, epoch, stock, counted, "rebuilt redis state from postgres");
        Ok(Rebuilt::Epoch(epoch))
    }
}
