//! Acknowledgements the engine itself can tell were lost, counted so that the price is
//! visible (`/metrics`, the harness's I6): async claims Postgres refused after the client
//! was told "granted", and retried claims Redis holds as settled that Postgres has no row
//! for (a failover to a standby that lacked the commit).

use std::sync::atomic::{AtomicU64, Ordering};

use super::CouponEngine;
use crate::{
    domain::ids::TemplateId,
    store::{arbiter::Ruling, redis::PendingIntent},
};

/// The counts, since the engine started.
#[derive(Debug, Default)]
pub(super) struct LostAcks {
    /// Async mode: acknowledged claims Postgres refused.
    async_refused: AtomicU64,
    /// Retries of claims Redis holds as settled that Postgres has no row for.
    settled_missing: AtomicU64,
}

impl LostAcks {
    /// One more settled grant found without its row (`claim.rs`).
    pub(super) fn settled_missing(&self) {
        self.settled_missing.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts and logs an acknowledged async claim whose intent Postgres did not store as
    /// acknowledged (refused, fenced, or a duplicate holding another coupon), whichever task
    /// decided it: the persister, or the reconciler after the persister missed it. Called
    /// once the intent has left Redis's `pending`, so one intent is counted once (unless a
    /// persister batch still deciding it when the reconciler finds it stale, after
    /// Postgres stalled for longer than that, counts it a second time). The reconciler's
    /// count may include a claim whose server stopped before answering it: Redis cannot
    /// tell that one from an acknowledged one, and the count errs towards reporting.
    pub(super) fn async_refused(
        &self,
        template_id: TemplateId,
        intent: &PendingIntent,
        verdict: &Ruling,
    ) {
        // The price of async mode, counted and visible: the client was told "granted" (with
        // this coupon id) before Postgres decided, and Postgres said otherwise.
        self.async_refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%template_id, request_id = %intent.request_id, ?verdict,
            "acknowledged async claim refused by postgres: the acknowledgement is lost");
    }
}

impl CouponEngine {
    /// Async mode: acknowledged claims that Postgres refused since start (each one a lost
    /// acknowledgement, reported by the harness as I6).
    pub fn acknowledged_claims_refused(&self) -> u64 {
        self.inner.lost_acks.async_refused.load(Ordering::Relaxed)
    }

    /// Retries of claims Redis held as settled that Postgres had no row for, since start:
    /// after a Postgres failover, claims acknowledged by the old primary and lost with it
    /// (those a client retried; the rest only the harness's record can name).
    pub fn settled_claims_missing(&self) -> u64 {
        self.inner.lost_acks.settled_missing.load(Ordering::Relaxed)
    }
}
