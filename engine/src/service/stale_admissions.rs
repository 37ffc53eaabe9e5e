//! Sync-mode claims that Redis admitted and Postgres refused. Each one means Redis's
//! counters were behind Postgres when it admitted: a snapshot or AOF restart, a lagging
//! replica, an evicted key. The refusal stands, so no claim is wrongly granted, but a Redis
//! that changed identity must be rebuilt *before* it admits (`identity.rs`). After such a
//! change this count stays at zero, and the property tests check that it does.

use std::sync::atomic::{AtomicU64, Ordering};

use super::CouponEngine;
use crate::{
    domain::ids::TemplateId,
    invariant::{Finding, Invariant},
    store::arbiter::Verdict,
};

/// Sync-mode claims Redis admitted and Postgres refused since the engine started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaleAdmissions {
    /// Refused because the template's counted coupons had reached its stock: Redis's stock
    /// counter was behind (`/metrics`: `reason="stock_empty"`).
    pub stock_empty: u64,
    /// Refused because the user had reached the per-user limit: Redis's per-user count was
    /// behind (`reason="user_limit"`).
    pub user_limit: u64,
}

impl StaleAdmissions {
    /// Both kinds together.
    pub fn total(&self) -> u64 {
        self.stock_empty + self.user_limit
    }

    /// What the counts say against the invariants whose Redis side they break: I2 (Redis's
    /// stock counter agrees with Postgres) and I3 (so does each user's count). None when
    /// both are zero.
    pub fn findings(&self) -> Vec<Finding> {
        [
            (Invariant::I2, self.stock_empty, "stock", "stock counter"),
            (
                Invariant::I3,
                self.user_limit,
                "the per-user limit",
                "per-user count",
            ),
        ]
        .into_iter()
        .filter(|(_, n, _, _)| *n > 0)
        .map(|(invariant, n, refused_for, counter)| {
            Finding::new(
                invariant,
                format!(
                    "Redis admitted {n} sync claims that Postgres refused for {refused_for}: \
                     its {counter} was behind Postgres's when it admitted them"
                ),
            )
        })
        .collect()
    }
}

#[derive(Debug, Default)]
pub(super) struct Counts {
    stock_empty: AtomicU64,
    user_limit: AtomicU64,
}

impl CouponEngine {
    /// Counts a claim Redis admitted and Postgres refused (`verdict`: the refusal).
    pub(super) fn note_stale_admission(&self, template_id: TemplateId, verdict: &Verdict) {
        let counts = &self.inner.stale_admissions;
        let counter = match verdict {
            Verdict::UserLimit => &counts.user_limit,
            _ => &counts.stock_empty,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // Debug: a stale Redis makes every claim in flight say this; the rebuild (once) warns.
        tracing::debug!(%template_id, ?verdict, "postgres refused a claim redis admitted");
    }

    /// Sync mode: claims Redis admitted and Postgres refused since start.
    pub fn stale_admissions(&self) -> StaleAdmissions {
        let counts = &self.inner.stale_admissions;
        StaleAdmissions {
            stock_empty: counts.stock_empty.load(Ordering::Relaxed),
            user_limit: counts.user_limit.load(Ordering::Relaxed),
        }
    }
}
