//! Rebuild of a template's Redis state from Postgres, fenced against late writers by the
//! template epoch (docs/ARCHITECTURE.md, "Rebuild and fencing").

use super::CouponEngine;
use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
};

use futures::TryStreamExt;

use crate::{
    domain::ids::TemplateId,
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
    store::{
        postgres::{self, StoreIdentities},
        redis::{Published, SLICE},
    },
};

/// Slices written to Redis at once by a rebuild: Postgres's next rows arrive while Redis
/// takes the last ones, and each slice stays one short command or pipeline.
const SLICES_IN_FLIGHT: usize = 4;

/// The rebuild of each template under way in this process: one async lock per template,
/// dropped from the map once nobody holds or waits for it.
#[derive(Debug, Default)]
pub(super) struct InFlight(std::sync::Mutex<HashMap<TemplateId, Arc<tokio::sync::Mutex<()>>>>);

impl InFlight {
    fn slot(&self, template: TemplateId) -> Slot<'_> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let lock = map.entry(template).or_default().clone();
        Slot {
            owner: self,
            template,
            lock,
        }
    }
}

/// A turn at one template's rebuild; leaving it forgets the template when nobody else waits.
struct Slot<'a> {
    owner: &'a InFlight,
    template: TemplateId,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Slot<'_> {
    async fn turn(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.lock.clone().lock_owned().await
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut map = self
            .owner
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Two references: the map's and this slot's; nobody else holds (a rebuild's turn
        // holds one too) or waits.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.template);
        }
    }
}

/// How long a rebuild may run before it is given up, so that one hung on a blackholed store
/// does not hold its template's turn for ever. Far above any rebuild measured (1.5 M
/// shoppers: 16 s on two busy cores); a rebuild given up leaves the template fenced, or
/// committed and sealed for the next caller to publish, never half-published.
const REBUILD_BUDGET: std::time::Duration = std::time::Duration::from_secs(120);

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
    /// A store changed (a Redis restart or failover, a Postgres failover or restore):
    /// rebuild whatever Redis holds.
    StoreChanged,
}

impl Trigger {
    /// The name recorded with the rebuild (`template_rebuild.trigger`).
    fn name(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Disagrees(_) => "disagrees",
            Self::StoreChanged => "identity",
        }
    }
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
    /// meanwhile — fences the template in Redis (it admits nothing), streams the coupons
    /// counting against stock per user and the recent outcomes into Redis a slice at a time,
    /// settles unapplied outbox rows (the count already excludes revoked coupons), commits,
    /// and only then publishes the staged state. A claim admitted under an older epoch is
    /// fenced when its batch is decided.
    ///
    /// The rebuild runs in a task of its own: a caller that gives up at its deadline does
    /// not cancel it, so a rebuild longer than one request's deadline (a million shoppers)
    /// still finishes, and the next request finds it done.
    pub async fn resync(&self, template_id: TemplateId, trigger: Trigger) -> EngineResult<Rebuilt> {
        // The callers of this process queue here, each in its own task (one that reaches its
        // deadline leaves the queue), not each on a Postgres connection waiting for the
        // template's advisory lock; most then find the work done.
        let slot = self.inner.rebuilds.slot(template_id);
        let turn = slot.turn().await;
        if self.already_rebuilt(template_id, trigger).await {
            return Ok(Rebuilt::AlreadyInitialised);
        }
        // The rebuild itself holds the turn in a task of its own, so the next caller waits
        // for it even if this one gives up.
        let engine = self.clone();
        let rebuild = tokio::spawn(async move {
            let _turn = turn;
            tokio::time::timeout(
                REBUILD_BUDGET,
                engine.resync_now(template_id, trigger, None),
            )
            .await
            .unwrap_or_else(|_| {
                tracing::error!(%template_id, budget = ?REBUILD_BUDGET,
                    "a rebuild outlived its budget (a store hung?): given up; the next caller rebuilds");
                Err(EngineError::Unavailable("the redis state rebuild timed out".into()))
            })
        });
        rebuild.await.unwrap_or_else(|e| {
            tracing::error!(%template_id, error = %e, "a rebuild task failed");
            Err(EngineError::Unavailable(
                "the redis state rebuild failed".into(),
            ))
        })
    }

    /// Whether Redis already shows what `trigger` asks for, without taking any lock (a hint;
    /// `resync_now` decides under the template's lock).
    async fn already_rebuilt(&self, template_id: TemplateId, trigger: Trigger) -> bool {
        match (self.inner.redis.complete_epoch(template_id).await, trigger) {
            (Ok(Some(_)), Trigger::Missing) => true,
            (Ok(Some(e)), Trigger::Disagrees(seen)) => e != seen,
            _ => false,
        }
    }

    /// Rebuilds the template's Redis keys for a change of store identity, recording the
    /// pair of identities the rebuild was made for.
    pub(super) async fn resync_for_stores(
        &self,
        template_id: TemplateId,
        made_for: &StoreIdentities,
    ) -> EngineResult<Rebuilt> {
        Box::pin(self.resync_now(template_id, Trigger::StoreChanged, Some(made_for))).await
    }

    async fn resync_now(
        &self,
        template_id: TemplateId,
        trigger: Trigger,
        made_for: Option<&StoreIdentities>,
    ) -> EngineResult<Rebuilt> {
        #[cfg(feature = "mutants")]
        if let Some(r) = crate::service::mutants::rebuild(self, template_id).await {
            return r;
        }
        let template = self.template(template_id).await?;
        let mut tx = self.inner.pg.begin().await?;
        postgres::lock_template(&mut tx, template_id, true).await?;
        self.finish_committed_rebuild(&mut tx, template_id).await?;
        let complete = self.inner.redis.complete_epoch(template_id).await?;
        let needed = match (complete, trigger) {
            (None, _) => true,
            (Some(e), Trigger::StoreChanged) => {
                !self.built_for(&mut tx, template_id, e, made_for).await?
            }
            (Some(e), Trigger::Disagrees(seen)) => e == seen,
            (Some(_), Trigger::Missing) => false,
        };
        if !needed {
            return Ok(Rebuilt::AlreadyInitialised);
        }
        let epoch = postgres::bump_epoch(&mut tx, template_id).await?;
        postgres::record_rebuild(&mut tx, template_id, epoch, trigger.name(), made_for).await?;
        let redis = &self.inner.redis;
        let started = std::time::Instant::now();
        redis.fence_for_rebuild(template_id, epoch).await?;
        let counted = AtomicI64::new(0);
        postgres::counted_per_user_slices(&mut tx, template_id, SLICE)
            .try_for_each_concurrent(SLICES_IN_FLIGHT, |slice| {
                counted.fetch_add(slice.iter().map(|(_, n)| n).sum::<i64>(), Ordering::Relaxed);
                async move { Ok(redis.stage_claimed(template_id, epoch, &slice).await?) }
            })
            .await?;
        let counted = counted.into_inner();
        postgres::settle_outbox(&mut tx, template_id).await?;
        let stock = template.spec.total_stock - counted;
        if stock < 0 {
            tracing::error!(%template_id, counted, total = template.spec.total_stock,
                "more coupons count against stock than exist: oversold");
        }
        let window_ms = self.inner.config.idempotency_ttl.as_millis() as i64;
        let now_ms = (Self::now().unix_timestamp_nanos() / 1_000_000) as i64;
        postgres::recent_claims_slices(&mut tx, template_id, window_ms, SLICE)
            .try_for_each_concurrent(SLICES_IN_FLIGHT, |slice| async move {
                Ok(redis
                    .restore_requests(template_id, &slice, epoch, stock.max(0), now_ms, window_ms)
                    .await?)
            })
            .await?;
        redis.seal_rebuild(template_id, epoch, stock).await?;
        // A rebuild that dies here leaves the template fenced under an epoch Postgres never
        // commits: the next caller rebuilds it (the sequence never hands that epoch out again).
        self.inner
            .failpoints
            .hit(Failpoint::RebuildAfterRedis)
            .await?;
        tx.commit().await?;
        // Published only once committed, so Redis never holds an epoch Postgres did not
        // commit. Should this fail, the next caller publishes it (finish_committed_rebuild).
        redis.publish_rebuild(template_id, epoch).await?;
        self.stock_came_back(template_id);
        let took_ms = started.elapsed().as_millis() as u64;
        if trigger == Trigger::Missing {
            tracing::info!(%template_id, epoch, stock, counted, took_ms,
                "built redis state from postgres");
        } else {
            tracing::warn!(%template_id, epoch, stock, counted, took_ms, ?trigger,
                "redis disagreed with postgres (stale, restarted or ahead): rebuilt it from postgres");
        }
        Ok(Rebuilt::Epoch(epoch))
    }

    /// Whether Redis's complete state at `complete` is Postgres's committed state and this
    /// template was already rebuilt for these stores: a check that rebuilt some templates
    /// and then failed before recording the new pair (its connection was cut, the next
    /// template's rebuild failed) is retried, and the retry must not rebuild, fence and
    /// bump again what it already rebuilt for the same change (I14).
    async fn built_for(
        &self,
        conn: &mut sqlx::PgConnection,
        template_id: TemplateId,
        complete: i64,
        made_for: Option<&StoreIdentities>,
    ) -> EngineResult<bool> {
        let Some(stores) = made_for else {
            return Ok(false);
        };
        #[cfg(feature = "mutants")]
        if crate::service::mutants::forgets_rebuilds(self) {
            return Ok(false);
        }
        Ok(postgres::epoch(&mut *conn, template_id).await? == complete
            && postgres::rebuilt_for(conn, template_id, stores).await?)
    }

    /// Publishes a rebuild that Postgres committed but whose rebuilder did not get to
    /// publishing it (it died, or Redis did not answer): its counts are exact as of its
    /// commit, and nothing has been admitted under its epoch since (it was never published).
    async fn finish_committed_rebuild(
        &self,
        conn: &mut sqlx::PgConnection,
        template_id: TemplateId,
    ) -> EngineResult<()> {
        let committed = postgres::epoch(conn, template_id).await?;
        if self
            .inner
            .redis
            .publish_rebuild(template_id, committed)
            .await?
            == Published::Now
        {
            tracing::warn!(%template_id, epoch = committed,
                "published a committed rebuild its rebuilder did not publish");
        }
        Ok(())
    }
}
