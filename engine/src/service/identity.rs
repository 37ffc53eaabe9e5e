//! Redis's identity (docs/ARCHITECTURE.md, "A Redis that lies"): a Redis restarted from an
//! older snapshot or an AOF missing its last second, or a promoted replica that lagged,
//! comes back with stale but *present* keys. Postgres refuses what such a Redis wrongly
//! admits, but the stale counters would keep refusing or admitting wrongly until rebuilt.
//! Each restart or promotion gives Redis a new `run_id`; the one every namespace was last
//! rebuilt against is kept in Postgres, so any engine process (or a new one) that sees
//! another rebuilds the live templates before trusting the counters again.
//!
//! When it is checked: before a new server admits anything, and every
//! `identity_check_interval` besides. A restarted Redis or a promoted replica does not hold
//! the claim script (Redis 7 neither persists nor replicates `SCRIPT LOAD`, and the engine
//! loads it on masters only), so its NOSCRIPT is the sign, on the very claim that would
//! have been admitted, that the server is new; the claim waits for the check and the
//! rebuild, then loads the script. A check that finds another identity gives the claim
//! script a new hash, so a server that kept its scripts across a change of role (a former
//! master that resynced as a replica and is promoted again: Redis 7 keeps them) lacks the
//! current one. What gives no sign at all (older keys restored into a running server, a
//! failback while this process ran no claim and no check) is left to Postgres, which
//! refuses whatever stale counters admit wrongly.
//!
//! Postgres has an identity too: its system identifier and the timeline it writes on. A
//! failover to an asynchronous standby that lacked the last commits, or a point-in-time
//! restore, gives it a new timeline, and Redis then counts coupons this Postgres never
//! stored (the stock they took never sells again). Redis state is built against the pair;
//! a change of either rebuilds the live templates from the Postgres the engine now reaches.
//! Postgres is read through the engine's stable address (a VIP, HAProxy or PgBouncer in
//! front of the primary); the periodic check notices a new one within
//! `identity_check_interval` (docs/api.md, "Postgres failover").

use std::{
    sync::{
        Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::sync::Mutex;

use super::{CouponEngine, Inner};
use crate::{
    error::{EngineError, EngineResult},
    store::postgres::{self, StoreIdentities},
};

/// Checks of a new server one NOSCRIPT may go through while it keeps changing under them.
const MAX_CHECKS: usize = 3;

/// What the identity checks of this process share.
#[derive(Debug, Default)]
pub(super) struct IdentityGate {
    /// One check at a time of a server that answered NOSCRIPT.
    one_at_a_time: Mutex<()>,
    /// How many such checks have finished: a claim that waited for the gate while another
    /// claim's check ran does not repeat it.
    checks: AtomicU64,
    /// Whether the last of those checks failed (the claims that waited for it fail too).
    last_failed: AtomicBool,
    /// The Redis identity the claim script's current hash was made for.
    claim_script_made_for: std::sync::Mutex<Option<String>>,
}

/// Starts the periodic identity check; it ends when the engine is dropped.
pub(super) fn spawn_watch(engine: Weak<Inner>, every: Duration) {
    if every.is_zero() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = engine.upgrade() else {
                return;
            };
            if let Err(e) = (CouponEngine { inner }).check_redis_identity().await {
                tracing::debug!(error = %e, "redis identity check failed; retrying");
            }
        }
    });
}

impl CouponEngine {
    /// A server that answered NOSCRIPT to the claim script: checks its identity (rebuilding
    /// every live template if it changed), then loads the engine's scripts, so that the
    /// claim that saw it, and every other, is admitted only by a server already checked.
    /// Claims that meet the same server at once wait for one check and share its outcome: a
    /// failed check (Postgres down, a rebuild that failed) is not repeated by each of them.
    /// `seen` is [`Self::new_server_checks`] as it was before the claim ran its script: a
    /// check that ended since then stands for this claim too.
    pub(super) async fn check_new_server(&self, seen: u64) -> EngineResult<()> {
        #[cfg(feature = "mutants")]
        if let Some(r) = Box::pin(crate::service::mutants::check_new_server(self)).await {
            return r;
        }
        let gate = &self.inner.identity_gate;
        let _one_at_a_time = gate.one_at_a_time.lock().await;
        if gate.checks.load(Ordering::Acquire) != seen {
            return if gate.last_failed.load(Ordering::Acquire) {
                Err(EngineError::Unavailable(
                    "redis is new to the engine and could not be checked yet".into(),
                ))
            } else {
                Ok(())
            };
        }
        let outcome = self.check_then_load_scripts().await;
        gate.last_failed.store(outcome.is_err(), Ordering::Release);
        gate.checks.fetch_add(1, Ordering::Release);
        outcome
    }

    /// How many checks of a new server have ended.
    pub(super) fn new_server_checks(&self) -> u64 {
        self.inner.identity_gate.checks.load(Ordering::Acquire)
    }

    async fn check_then_load_scripts(&self) -> EngineResult<()> {
        for _ in 0..MAX_CHECKS {
            // A first start or a flushed script cache is checked too: it costs one `INFO` and
            // one Postgres read, and only a changed identity makes Redis suspect.
            let (changed, checked) = self.check_identity().await?;
            self.inner.redis.load_scripts().await?;
            // A server that changed between the check and the load would hold the scripts
            // unchecked: take them away again, so that its claims wait here, and check it.
            if self.inner.redis.identity().await? == checked {
                tracing::info!(
                    changed,
                    "redis answered NOSCRIPT: identity checked before admitting"
                );
                return Ok(());
            }
            self.inner.redis.flush_scripts().await?;
            tracing::warn!("redis changed again while it was being checked; checking again");
        }
        Err(EngineError::Unavailable(
            "redis kept changing while it was being checked".into(),
        ))
    }

    /// Compares the stores' identities (Redis's `run_id`, Postgres's system identifier and
    /// timeline) with the pair recorded for this namespace and, if either changed, rebuilds
    /// every live template from Postgres before recording the new pair. Returns true when a
    /// change was found (by this check, or by another server's while this one waited).
    pub async fn check_redis_identity(&self) -> EngineResult<bool> {
        Ok(self.check_identity().await?.0)
    }

    /// [`Self::check_redis_identity`], and the Redis identity it checked.
    ///
    /// The recorded pair's row stays locked from the read to the record, so servers that
    /// notice one change at once take turns: the first rebuilds, the others find the new
    /// pair recorded and rebuild nothing (one epoch bump per template per change). The lock
    /// is held on a transaction kept open through the rebuilds, which may take longer than
    /// the pool's idle-in-transaction limit on a template with millions of shoppers.
    async fn check_identity(&self) -> EngineResult<(bool, String)> {
        let run_id = self.inner.redis.identity().await?;
        self.renew_claim_script_for(&run_id);
        let ns = self.inner.redis.namespace();
        let mut tx = self.inner.pg.begin().await?;
        sqlx::query("SET LOCAL idle_in_transaction_session_timeout = 0")
            .execute(&mut *tx)
            .await?;
        let current = StoreIdentities {
            redis: run_id.clone(),
            postgres: Some(postgres::postgres_identity(&mut tx).await?),
        };
        let recorded = postgres::lock_store_identities(&mut tx, ns).await?;
        let change = recorded.as_ref().and_then(|r| identity_change(r, &current));
        #[cfg(feature = "mutants")]
        let change =
            crate::service::mutants::identity_change(self, recorded.as_ref(), &current, change);
        if recorded.is_some() && change.is_none() {
            // Same stores; a row recorded before Postgres's identity was known is completed.
            if recorded.as_ref().is_some_and(|r| r.postgres.is_none()) {
                postgres::record_store_identities(&mut tx, ns, &current).await?;
            }
            tx.commit().await?;
            return Ok((false, run_id));
        }
        if let (Some(old), Some(what)) = (&recorded, change) {
            self.inner.redis_suspect.open();
            tracing::warn!(namespace = ns, changed = what, old = ?old, new = ?current,
                "a store restarted, failed over or was restored: rebuilding live templates from postgres before trusting redis's counters");
            for id in postgres::live_template_ids(&self.inner.pg).await? {
                self.resync_for_stores(id, &current).await?;
            }
        }
        // Recorded only after every rebuild succeeded: a failure is retried on the next check.
        postgres::record_store_identities(&mut tx, ns, &current).await?;
        tx.commit().await?;
        Ok((recorded.is_some(), run_id))
    }

    /// Gives the claim script a new hash when Redis is not the one its hash was made for.
    /// The scripts are loaded only on servers just checked, so a server demoted since and
    /// promoted again (Redis 7 keeps a master's scripts through its resync as a replica)
    /// still holds an old hash, answers NOSCRIPT to the new one and is checked before it
    /// admits. Once per identity seen, not per check: a flushed script cache on the same
    /// server is loaded again under the same hash, and the hashes do not pile up.
    fn renew_claim_script_for(&self, identity: &str) {
        let mut made_for = self
            .inner
            .identity_gate
            .claim_script_made_for
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if made_for.as_deref() != Some(identity) {
            self.inner.redis.renew_claim_script();
            *made_for = Some(identity.to_owned());
        }
    }
}

/// Which store changed between the recorded pair and the current one (None: neither). A
/// pair recorded before Postgres's identity was known counts only Redis.
pub(crate) fn identity_change(
    recorded: &StoreIdentities,
    current: &StoreIdentities,
) -> Option<&'static str> {
    let redis = recorded.redis != current.redis;
    let postgres = recorded.postgres.is_some() && recorded.postgres != current.postgres;
    match (redis, postgres) {
        (false, false) => None,
        (true, false) => Some("redis"),
        (false, true) => Some("postgres"),
        (true, true) => Some("redis and postgres"),
    }
}
