//! A Redis that may just have lost writes (docs/ARCHITECTURE.md, "A Redis that lies"): across
//! a failover, the promoted replica can lack the recorded outcome of a claim that Postgres
//! granted, while its counters already say "sold out" or "at the limit". A retry of that
//! claim would then be refused by Redis alone, though the client holds the coupon (I7).
//! While Redis is suspect — for a while after it timed out or dropped a claim's connection,
//! or after its identity changed — a refusal is checked against Postgres before it is
//! answered. Outside that window refusals stay one Redis round trip.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use redis::RedisError;

use super::{ClaimReceipt, CouponEngine};
use crate::{
    domain::ids::{RequestId, TemplateId, UserId},
    error::EngineResult,
    store::arbiter,
};

/// How long Redis stays suspect after the last sign of trouble: longer than a failover
/// takes to be noticed and rebuilt (node timeout, election, identity check, rebuild).
const SUSPECT_FOR: Duration = Duration::from_secs(15);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Until when (ms since the Unix epoch) Redis refusals are checked against Postgres.
#[derive(Debug, Default)]
pub(super) struct SuspectWindow {
    until_ms: AtomicU64,
}

impl SuspectWindow {
    /// Opens the window from now on, for [`SUSPECT_FOR`] (never shortens it).
    pub(super) fn open(&self) {
        let until = now_ms() + SUSPECT_FOR.as_millis() as u64;
        self.until_ms.fetch_max(until, Ordering::Relaxed);
    }

    /// Opens the window if `e` is the kind of error a dying or failing-over server gives.
    pub(super) fn note_error(&self, e: &RedisError) {
        if e.is_timeout() || e.is_io_error() || e.is_connection_dropped() {
            self.open();
        }
    }

    fn is_open(&self) -> bool {
        now_ms() < self.until_ms.load(Ordering::Relaxed)
    }
}

impl CouponEngine {
    /// A refusal from Redis, answered as the coupon the request id already holds in
    /// Postgres if Redis is suspect and it holds one.
    pub(super) async fn recheck_refusal(
        &self,
        template_id: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        refusal: crate::EngineError,
    ) -> EngineResult<ClaimReceipt> {
        if !self.inner.redis_suspect.is_open() {
            return Err(refusal);
        }
        // As a sync replay does (claim.rs): only what Postgres durably holds.
        let stored =
            arbiter::durable_claim_by_request(&self.inner.pg, template_id, request_id).await?;
        match stored {
            Some((coupon_id, owner)) => super::claim::replay_of(
                ClaimReceipt {
                    coupon_id,
                    template_id,
                    remaining_stock: 0,
                    replay: true,
                },
                coupon_id,
                &owner,
                user_id,
            ),
            None => Err(refusal),
        }
    }
}
