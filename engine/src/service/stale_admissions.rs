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
    store::arbiter::Ruling,
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

    /// The counts by the invariant whose Redis side each breaks: I2 (Redis's stock counter
    /// agrees with Postgres) and I3 (so does each user's count).
    pub fn by_invariant(&self) -> [StaleCount; 2] {
        [
            StaleCount {
                invariant: Invariant::I2,
                count: self.stock_empty,
                refused_for: "stock",
                counter: "stock counter",
            },
            StaleCount {
                invariant: Invariant::I3,
                count: self.user_limit,
                refused_for: "the per-user limit",
                counter: "per-user count",
            },
        ]
    }

    /// The findings of [`Self::by_invariant`]; none when both counts are zero.
    pub fn findings(&self) -> Vec<Finding> {
        self.by_invariant()
            .iter()
            .filter_map(StaleCount::finding)
            .collect()
    }
}

/// One invariant's share of [`StaleAdmissions`].
#[derive(Debug, Clone, Copy)]
pub struct StaleCount {
    /// The invariant whose Redis side these claims break.
    pub invariant: Invariant,
    /// Claims Redis admitted and Postgres refused for this reason.
    pub count: u64,
    /// What Postgres refused these claims for, in words ("stock").
    pub refused_for: &'static str,
    counter: &'static str,
}

impl StaleCount {
    /// The violation these claims show, if there were any.
    pub fn finding(&self) -> Option<Finding> {
        (self.count > 0).then(|| {
            Finding::new(
                self.invariant,
                format!(
                    "Redis admitted {} sync claims that Postgres refused for {}: its {} was \
                     behind Postgres's when it admitted them",
                    self.count, self.refused_for, self.counter
                ),
            )
        })
    }
}

#[derive(Debug, Default)]
pub(super) struct Counts {
    stock_empty: AtomicU64,
    user_limit: AtomicU64,
}

impl Counts {
    /// Counts a claim Redis admitted and Postgres refused (`verdict`: the refusal).
    pub(super) fn note(&self, template_id: TemplateId, verdict: &Ruling) {
        let counter = match verdict {
            Ruling::UserLimit => &self.user_limit,
            _ => &self.stock_empty,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // Debug: a stale Redis makes every claim in flight say this; the rebuild (once) warns.
        tracing::debug!(%template_id, ?verdict, "postgres refused a claim redis admitted");
    }

    fn now(&self) -> StaleAdmissions {
        StaleAdmissions {
            stock_empty: self.stock_empty.load(Ordering::Relaxed),
            user_limit: self.user_limit.load(Ordering::Relaxed),
        }
    }
}

impl CouponEngine {
    /// Sync mode: claims Redis admitted and Postgres refused since start.
    pub fn stale_admissions(&self) -> StaleAdmissions {
        self.inner.stale_admissions.now()
    }
}
