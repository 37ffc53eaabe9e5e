//! Store settings that weaken what the engine promises, read at start so the server can say
//! so loudly (docs/api.md, "Sync mode (default) cannot oversell"): the engine still runs,
//! since a development machine may want them.

use super::CouponEngine;
use crate::store::postgres;

impl CouponEngine {
    /// Whether Redis may evict the engine's keys, in words (None when it cannot, or when
    /// the server does not let us read its policy). Only `noeviction` is safe. An
    /// `allkeys-*` policy may evict `claimed` or `epoch` at any time. A `volatile-*` policy
    /// evicts only keys with a TTL, which here are the `req` records of claims and the
    /// redeem locks: nothing can oversell then (Postgres decides), and a lost redeem lock
    /// leaves the redeem's guarded `UPDATE` to refuse a second use, but a retry of a granted
    /// claim whose record was evicted is answered by Redis's counters, `user_limit` or
    /// `stock_empty`, though the coupon is stored, as after the record's TTL.
    pub async fn redis_eviction_risk(&self) -> Option<String> {
        let policy = self.inner.redis.maxmemory_policy().await.ok()?;
        if policy.starts_with("allkeys") {
            Some(format!(
                "Redis maxmemory-policy is {policy}: it may evict the engine's counters; Postgres \
                 still refuses any oversell, but evictions cost rebuilds and refused claims. \
                 Use noeviction"
            ))
        } else if policy.starts_with("volatile") {
            Some(format!(
                "Redis maxmemory-policy is {policy}: it may evict the claims' idempotency \
                 records; nothing can oversell, but a retry of a granted claim whose record \
                 was evicted can be refused though its coupon is stored. Use noeviction"
            ))
        } else {
            None
        }
    }

    /// What Postgres's durability settings put at risk, in words (empty when nothing, or
    /// when they cannot be read). A sync claim is answered from its batch's commit, so a
    /// commit that does not wait for its flush (`synchronous_commit = off`) or a flush that
    /// is not one (`fsync = off`) lets a crash take back claims already acknowledged, and a
    /// commit that does not wait for a standby (`synchronous_commit = local`, or a standby
    /// replicating asynchronously) lets a failover take them back.
    pub async fn postgres_durability_risks(&self) -> Vec<String> {
        let Ok((sync_commit, fsync)) = postgres::durability_settings(&self.inner.pg).await else {
            return Vec::new();
        };
        let mut risks = Vec::new();
        if sync_commit == "off" {
            risks.push(
                "Postgres synchronous_commit is off: a Postgres crash can lose sync claims \
                 already acknowledged. Use on (the default) or remote_apply, with a \
                 synchronous standby"
                    .to_owned(),
            );
        } else if sync_commit == "local" {
            risks.push(
                "Postgres synchronous_commit is local: a commit does not wait for any \
                 standby, so a failover loses the sync claims acknowledged last. Use on or \
                 remote_apply with synchronous_standby_names set"
                    .to_owned(),
            );
        }
        if let Ok(asynchronous) = postgres::asynchronous_standbys(&self.inner.pg).await
            && !asynchronous.is_empty()
        {
            risks.push(format!(
                "Postgres replicates asynchronously to {}: a failover to it loses the claims \
                 acknowledged since its last replay. Name it in synchronous_standby_names \
                 (with synchronous_commit on or remote_apply) if failovers must lose nothing",
                asynchronous.join(", ")
            ));
        }
        if fsync == "off" {
            risks.push(
                "Postgres fsync is off: a crash of its machine can lose acknowledged claims \
                 (and the database). Turn it on"
                    .to_owned(),
            );
        }
        risks
    }
}
