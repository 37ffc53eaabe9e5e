//! Rebuild of a template's Redis state from Postgres, fenced against late writers by the
//! template epoch (docs/ARCHITECTURE.md, "Rebuild and fencing").

use super::CouponEngine;
use crate::{domain::ids::TemplateId, error::EngineResult, failpoint::Failpoint, store::postgres};

/// What a rebuild call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebuilt {
    /// Redis state was rewritten under this new epoch.
    Epoch(i64),
    /// Another caller rebuilt it first (or it needed none); nothing was done.
    AlreadyInitialised,
}

/// Why Redis state is suspect; decides whether a rebuild is still needed once the
/// template's lock is held (the caller that waited for another's rebuild does nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A key of the template's state is absent (stock, epoch, or the `claimed` hash).
    Missing,
    /// Redis state of this epoch disagrees with Postgres (stale, fenced, or ahead).
    Disagrees(i64),
    /// Redis itself changed (restart, failover): rebuild whatever it holds.
    Always,
}

impl CouponEngine {
    /// Rebuilds the template's Redis keys from Postgres if they are absent.
    pub async fn rebuild(&self, template_id: TemplateId) -> EngineResult<Rebuilt> {
        self.resync(template_id, Trigger::Missing).await
    }

    /// Rebuilds the template's Redis keys from Postgres when `trigger` still holds.
    ///
    /// Holding the template's exclusive advisory lock (one rebuild per template at a time;
    /// others wait, then find nothing to do), it takes a new epoch from the sequence — which
    /// also locks the template's counter row, so no claim batch or refund to stock runs
    /// meanwhile — counts coupons against stock and per user, settles unapplied outbox rows
    /// (the count already excludes revoked coupons) and writes Redis, all before commit. A
    /// claim admitted under an older epoch is fenced when its batch is decided.
    pub async fn resync(&self, template_id: TemplateId, trigger: Trigger) -> EngineResult<Rebuilt> {
        // Boxed: a claim may rebuild, so inline this future would make every claim's future
        // (copied by each HTTP layer) kilobytes larger for a path most claims never take.
        Box::pin(self.resync_now(template_id, trigger)).await
    }

    async fn resync_now(&self, template_id: TemplateId, trigger: Trigger) -> EngineResult<Rebuilt> {
        #[cfg(feature = "mutants")]
        if let Some(r) = crate::mutants::rebuild(self, template_id).await {
            return r;
        }
        let template = self.template(template_id).await?;
        let mut tx = self.inner.pg.begin().await?;
        postgres::lock_template(&mut tx, template_id, true).await?;
        let needed = match (self.inner.redis.complete_epoch(template_id).await?, trigger) {
            (None, _) | (_, Trigger::Always) => true,
            (Some(e), Trigger::Disagrees(seen)) => e == seen,
            (Some(_), Trigger::Missing) => false,
        };
        if !needed {
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
        // A rebuild that dies here leaves Redis one epoch ahead of Postgres; the sequence
        // never hands that epoch out again, so what Redis admits under it is refused.
        self.inner
            .failpoints
            .hit(Failpoint::RebuildAfterRedis)
            .await?;
        tx.commit().await?;
        if trigger == Trigger::Missing {
            tracing::info!(%template_id, epoch, stock, counted, "built redis state from postgres");
        } else {
            tracing::warn!(%template_id, epoch, stock, counted, ?trigger,
                "redis disagreed with postgres (stale, restarted or ahead): rebuilt it from postgres");
        }
        Ok(Rebuilt::Epoch(epoch))
    }
}
