//! A template's claim state rebuilt in slices (docs/ARCHITECTURE.md, "Rebuild and fencing"):
//! fence (admit nothing), stage the per-user counts and the recent outcomes a slice at a
//! time, seal with the stock, and publish once Postgres committed the epoch. Redis is never
//! busy with one rebuild command for longer than a slice, whatever the number of shoppers
//! (round 2 wrote the whole `claimed` hash in one script: 1.5 s of blocked Redis per million
//! shoppers, and past the client's timeout an epoch Postgres never committed).

use redis::RedisResult;

use super::{RedisStore, RequestRecord};
use crate::{domain::ids::TemplateId, store::records::RecentClaim};

/// Shoppers per `HSET` slice, and recent outcomes per pipeline: well under a millisecond of
/// Redis time each.
pub const SLICE: usize = 1000;

/// How long a staging hash and the rebuild marker outlive a rebuild that died: far longer
/// than any rebuild runs, short enough that what it left goes by itself.
const STAGING_TTL_SECS: u64 = 600;

/// What publishing a rebuild did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The staged state is now the template's, under the epoch.
    Now,
    /// No rebuild of this epoch is waiting (published already, superseded, or never begun).
    NotPending,
    /// The rebuild of this epoch has not sealed its staging hash (it died while staging).
    NotSealed,
}

impl RedisStore {
    /// Begins a rebuild under `epoch`: the template admits nothing until it is published.
    pub async fn fence_for_rebuild(&self, template: TemplateId, epoch: i64) -> RedisResult<()> {
        let k = self.keys(template);
        self.scripts
            .rebuild_fence
            .key(&k.stock)
            .key(k.staging(epoch))
            .key(&k.rebuilding)
            .key(&k.outcomes)
            .arg(epoch)
            .arg(STAGING_TTL_SECS)
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Adds one slice (at most [`SLICE`]) of per-user counts to the staging hash of `epoch`.
    pub async fn stage_claimed(
        &self,
        template: TemplateId,
        epoch: i64,
        slice: &[(String, i64)],
    ) -> RedisResult<()> {
        if slice.is_empty() {
            return Ok(());
        }
        let k = self.keys(template);
        let mut pipe = redis::pipe();
        let hset = pipe.cmd("HSET").arg(k.staging(epoch));
        for (user, n) in slice {
            hset.arg(user).arg(*n);
        }
        hset.ignore();
        self.pipe_on::<()>(&k.stock, &pipe).await
    }

    /// Re-records the outcome of persisted claims under the rebuild's epoch, so a retry after
    /// the rebuild gets its coupon back instead of a refusal. Written while the template is
    /// fenced, so no claim of the old epoch can meet (and drop) them; kept `ttl_ms` at least
    /// (the engine's idempotency window, `lua/outcomes.lua`).
    pub async fn restore_requests(
        &self,
        template: TemplateId,
        claims: &[RecentClaim],
        epoch: i64,
        remaining: i64,
        now_ms: i64,
        ttl_ms: i64,
    ) -> RedisResult<()> {
        let k = self.keys(template);
        for chunk in claims.chunks(SLICE) {
            let mut inv = self.scripts.remember.key(&k.outcomes);
            inv.arg(now_ms).arg(ttl_ms.max(1));
            for c in chunk {
                inv.arg(&c.claim_request_id).arg(
                    RequestRecord {
                        coupon_id: c.id,
                        user_id: &c.user_id,
                        remaining,
                        epoch,
                        at_ms: now_ms,
                    }
                    .encode(),
                );
            }
            inv.invoke_async::<i64>(&mut self.conn.clone()).await?;
        }
        Ok(())
    }

    /// Marks the staging hash of `epoch` complete, with the stock it publishes.
    pub async fn seal_rebuild(
        &self,
        template: TemplateId,
        epoch: i64,
        stock: i64,
    ) -> RedisResult<()> {
        let k = self.keys(template);
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(k.staging(epoch))
            .arg(super::CLAIMED_BUILT)
            .arg(stock.max(0))
            .ignore();
        self.pipe_on::<()>(&k.stock, &pipe).await
    }

    /// Makes the sealed rebuild of `epoch` the template's state; call only once Postgres has
    /// committed the epoch, so Redis never holds one Postgres did not commit.
    pub async fn publish_rebuild(
        &self,
        template: TemplateId,
        epoch: i64,
    ) -> RedisResult<Published> {
        let k = self.keys(template);
        let done: i64 = k
            .counters_of(&self.scripts.rebuild_publish)
            .key(&k.applied)
            .key(k.staging(epoch))
            .key(&k.rebuilding)
            .key(&k.outcomes)
            .arg(epoch)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match done {
            1 => Published::Now,
            -1 => Published::NotSealed,
            _ => Published::NotPending,
        })
    }

    /// The whole sequence at once, for a caller that commits nothing (the rebuild mutants).
    pub async fn rebuild(
        &self,
        template: TemplateId,
        stock: i64,
        epoch: i64,
        claimed: &[(String, i64)],
    ) -> RedisResult<()> {
        self.fence_for_rebuild(template, epoch).await?;
        for slice in claimed.chunks(SLICE) {
            self.stage_claimed(template, epoch, slice).await?;
        }
        self.seal_rebuild(template, epoch, stock).await?;
        self.publish_rebuild(template, epoch).await.map(drop)
    }
}
