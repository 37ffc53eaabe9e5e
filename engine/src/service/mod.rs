//! The coupon service: composes the Redis and Postgres stores into the flows (claim, redeem,
//! refund, rebuild, reconcile, expiry; docs/ARCHITECTURE.md, "Claim" onwards).

mod batcher;
mod checkout;
mod claim;
mod expire;
mod health;
mod identity;
mod lost_acks;
// The defect mutants replace the steps of this service: its children, reaching its state.
#[cfg(feature = "mutants")]
mod mutants;
mod outbox;
mod persister;
mod rebuild;
mod reconcile;
mod redeem;
mod refund;
mod risky_settings;
mod sold_out;
mod stale_admissions;
mod suspect;
mod template_cache;
mod templates;

use std::sync::{Arc, Weak};

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::Mutex;
use uuid::Uuid;

pub use batcher::{BATCH_BUCKETS, BatchHistogram, BatchLimits};
pub use checkout::{CheckoutLock, MAX_CHECKOUT_LOCK, Release};
pub use claim::ClaimReceipt;
pub use health::{HealthReport, PROBE_LIMIT, SLOW_AFTER, StoreHealth, StoreState};
pub use rebuild::{Rebuilt, Trigger};
pub(crate) use reconcile::pending_per_user;
pub use reconcile::{ReconcileOptions, ReconcileReport, TemplateDrift};
pub use redeem::Redemption;
pub use refund::RefundReceipt;
pub(crate) use sold_out::GateSays;
pub use stale_admissions::{StaleAdmissions, StaleCount};

use crate::{
    config::{EngineConfig, Persistence},
    domain::{coupon::Coupon, ids::UserId, template::Template},
    error::{EngineError, EngineResult},
    failpoint::Failpoints,
    store::{
        arbiter::{self, Ruling},
        postgres,
        redis::{PendingIntent, RedisStore},
    },
};

/// The coupon engine: cheap to clone, `Send + Sync`; all clones share one state.
#[derive(Clone, Debug)]
pub struct CouponEngine {
    inner: Arc<Inner>,
}

struct Inner {
    pg: PgPool,
    redis: RedisStore,
    config: EngineConfig,
    templates: template_cache::TemplateCache,
    persister: Option<persister::Handle>,
    batcher: batcher::Batcher,
    shutdown: Mutex<Option<tokio::task::JoinHandle<()>>>,
    failpoints: Failpoints,
    /// Acknowledgements the engine itself knows were lost (`lost_acks.rs`).
    lost_acks: lost_acks::LostAcks,
    /// Sync mode: claims Redis admitted and Postgres refused (`claim.rs`).
    stale_admissions: stale_admissions::Counts,
    /// The rebuild under way per template in this process (`rebuild.rs`).
    rebuilds: rebuild::InFlight,
    sold_out: sold_out::SoldOutGates,
    /// While Redis refusals are checked against Postgres (`suspect.rs`).
    redis_suspect: suspect::SuspectWindow,
    /// The check of a Redis new to the engine, and the claim script's hash (`identity.rs`).
    identity_gate: identity::IdentityGate,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CouponEngine")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CouponEngine {
    /// Builds an engine on an existing pool (migrated) and Redis store. Starts the task that
    /// watches Redis's identity and, in async mode, the persister; call
    /// [`CouponEngine::shutdown`] to drain it. Must be called inside a Tokio runtime.
    pub fn new(pg: PgPool, redis: RedisStore, config: EngineConfig) -> Self {
        #[cfg(feature = "mutants")]
        let redis = if config.variant == crate::Variant::D18 {
            redis.naming_request_keys()
        } else {
            redis
        };
        let limits = BatchLimits {
            max_batch: config.group_commit_max,
            max_wait: config.group_commit_wait,
        };
        let failpoints = Failpoints::default();
        let batcher = batcher::Batcher::new(
            pg.clone(),
            redis.clone(),
            limits,
            config.variant,
            config.deadline,
            failpoints.clone(),
        );
        let mut task = None;
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            let persister = match config.persistence {
                Persistence::Sync => None,
                Persistence::Async => {
                    let (handle, t) =
                        persister::spawn(weak.clone(), config.batch_size, config.batch_interval);
                    task = Some(t);
                    Some(handle)
                }
            };
            Inner {
                pg,
                redis,
                config,
                templates: template_cache::TemplateCache::default(),
                persister,
                batcher,
                shutdown: Mutex::new(None),
                failpoints,
                lost_acks: lost_acks::LostAcks::default(),
                stale_admissions: stale_admissions::Counts::default(),
                rebuilds: rebuild::InFlight::default(),
                sold_out: sold_out::SoldOutGates::default(),
                redis_suspect: suspect::SuspectWindow::default(),
                identity_gate: identity::IdentityGate::default(),
            }
        });
        if let Ok(mut slot) = inner.shutdown.try_lock() {
            *slot = task;
        }
        // Only now: a task spawned inside `new_cyclic` may run before the engine exists,
        // find nothing to upgrade to, and end.
        identity::spawn_watch(Arc::downgrade(&inner), inner.config.identity_check_interval);
        Self { inner }
    }

    /// Connects to Redis (one node or a cluster) and Postgres, applies migrations and builds
    /// the engine.
    pub async fn connect(
        redis: &crate::RedisTarget,
        database_url: &str,
        max_db_connections: u32,
        config: EngineConfig,
    ) -> EngineResult<Self> {
        let pg = postgres::pool_options(max_db_connections)
            .connect(database_url)
            .await?;
        postgres::MIGRATOR
            .run(&pg)
            .await
            .map_err(|e| EngineError::Unavailable(format!("migrations failed: {e}")))?;
        let redis = RedisStore::connect_to(redis, &config.namespace).await?;
        Ok(Self::new(pg, redis, config))
    }

    /// The Postgres pool.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pg
    }

    /// The Redis store.
    pub fn redis(&self) -> &RedisStore {
        &self.inner.redis
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The sold-out gates (mutants read them).
    #[cfg(feature = "mutants")]
    pub(crate) fn sold_out_gates(&self) -> &sold_out::SoldOutGates {
        &self.inner.sold_out
    }

    /// Fault-injection points of this engine (inert without the `failpoints` feature).
    pub fn failpoints(&self) -> &Failpoints {
        &self.inner.failpoints
    }

    /// Checks that both backends answer.
    /// Each within [`PROBE_LIMIT`]; the error names the store that is down.
    pub async fn health(&self) -> EngineResult<()> {
        let report = self.health_report().await;
        if report.down() {
            return Err(EngineError::Unavailable(report.summary()));
        }
        Ok(())
    }

    /// Has Postgres decide a batch of admitted intents of one template, on any connection of
    /// the pool (the reconciler; the group commit and the async persister keep a connection
    /// of their own between batches, `store/batch_connection.rs`).
    pub(crate) async fn decide_intents(
        &self,
        template: &Template,
        intents: &[PendingIntent],
    ) -> EngineResult<Vec<Ruling>> {
        let arbitration = self.inner.config.variant.arbitration();
        arbiter::decide_batch(&self.inner.pg, template, intents, arbitration).await
    }

    /// Sizes of the claim batches committed so far (sync mode's group commit).
    pub fn batch_sizes(&self) -> BatchHistogram {
        self.inner.batcher.stats().snapshot()
    }

    /// A user's coupons, newest first (at most 1,000).
    pub async fn user_coupons(&self, user_id: &UserId) -> EngineResult<Vec<Coupon>> {
        postgres::user_coupons(&self.inner.pg, user_id, 1000).await
    }

    /// One coupon, if it exists.
    pub async fn coupon(&self, id: Uuid) -> EngineResult<Option<Coupon>> {
        postgres::get_coupon(&self.inner.pg, id).await
    }

    /// Claim intents granted in Redis and not yet removed from pending, over the live
    /// templates (an ended sale has none left once reconciled, and costs a scrape nothing).
    pub async fn pending_intents(&self) -> EngineResult<i64> {
        let mut total = 0;
        for id in postgres::live_template_ids(&self.inner.pg).await? {
            total += self.inner.redis.pending_len(id).await?;
        }
        Ok(total)
    }

    /// Writes every intent the async persister holds (no-op in sync mode).
    pub async fn flush(&self) -> EngineResult<()> {
        match &self.inner.persister {
            Some(p) => p.flush().await,
            None => Ok(()),
        }
    }

    /// Async mode: writes the persister's queue; true if there was a persister to flush.
    pub(crate) async fn wrote_pending_claims(&self) -> EngineResult<bool> {
        match &self.inner.persister {
            Some(p) => p.flush().await.map(|()| true),
            None => Ok(false),
        }
    }

    /// Runs a step on a coupon (redeem, refund, lock, release), and once more if it found no
    /// coupon and the async persister had claims to write: the coupon may be an
    /// acknowledged claim still in its queue, and read-your-writes holds once it is written.
    pub(crate) async fn after_pending_claims<T, F>(&self, step: impl Fn() -> F) -> EngineResult<T>
    where
        F: Future<Output = EngineResult<T>>,
    {
        let first = step().await;
        if matches!(first, Err(EngineError::NotFound(_))) && self.wrote_pending_claims().await? {
            return step().await;
        }
        first
    }

    /// Drains the async persister and stops it. Claims after this stay pending in Redis
    /// until a reconcile persists them.
    pub async fn shutdown(&self) {
        if let Some(p) = &self.inner.persister {
            p.close().await;
        }
        if let Some(task) = self.inner.shutdown.lock().await.take()
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "persister task failed");
        }
    }

    /// Runs one client operation within the engine's deadline (docs/ARCHITECTURE.md,
    /// "Deadlines"). Past it the work is dropped where it stood, whatever store call it
    /// waited on: its outcome is unknown, and the client's retry with the same ids settles
    /// it. Mutant D12 has no deadline.
    pub(crate) async fn within_deadline<T>(
        &self,
        work: impl std::future::Future<Output = EngineResult<T>>,
    ) -> EngineResult<T> {
        // One await whatever the variant: the future holds `work` once (its size is copied
        // by every HTTP layer; see the claim future's size test). Tokio takes MAX as never.
        let deadline = self.inner.config.deadline;
        let bound = if self.inner.config.variant.has_deadlines() {
            deadline
        } else {
            std::time::Duration::MAX
        };
        tokio::time::timeout(bound, work).await.unwrap_or_else(|_| {
            Err(EngineError::Unavailable(format!(
                "no answer within the {} ms deadline; the outcome is unknown: retry with the \
                 same ids",
                deadline.as_millis()
            )))
        })
    }

    pub(crate) fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}
