//! Engine configuration.

use std::time::Duration;

pub use crate::persistence::Persistence;
use crate::variant::Variant;

/// Tunables of a [`crate::CouponEngine`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Prefix of every Redis key, so several engines (or tests) share one Redis.
    pub namespace: String,
    /// Sync or async claim persistence.
    pub persistence: Persistence,
    /// Take the per-coupon Redis lock around a redemption (the seed's guard; default on).
    pub redeem_lock: bool,
    /// Lock time-to-live: the backstop if a holder dies.
    pub lock_ttl: Duration,
    /// How long a checkout lock holds a coupon for its order when the lock names no TTL.
    pub checkout_lock_ttl: Duration,
    /// How often lapsed checkout locks are swept (the server's reconcile interval); the
    /// auditor allows a lapsed lock this long, plus a margin, before it reports I12.
    pub lock_sweep_every: Duration,
    /// How long a redemption waits for a busy coupon's lock before answering `busy`.
    pub lock_wait: Duration,
    /// How long a claim's outcome is remembered for retries with the same request id.
    pub idempotency_ttl: Duration,
    /// Async mode: most intents per batch INSERT.
    pub batch_size: usize,
    /// Async mode: longest wait before a partial batch is written. The default (10 ms, up to
    /// 512 intents) is what an acknowledged claim may wait before Postgres has it; fewer,
    /// larger batches cost less per claim than 5 ms and 256 did (docs/speed-log.md).
    pub batch_interval: Duration,
    /// A pending intent older than this is persisted by the reconciler.
    pub stale_pending_after: Duration,
    /// Sync mode: most claims Postgres decides in one transaction (group commit).
    pub group_commit_max: usize,
    /// Sync mode: longest a claim waits for others to join its batch. Zero (the default)
    /// adds no latency: a batch is whatever queued while the previous one committed.
    pub group_commit_wait: Duration,
    /// How often Redis's `run_id` is compared with the one its state was built against
    /// (zero: only when the reconciler runs).
    pub identity_check_interval: Duration,
    /// Every claim, redeem and refund answers within this bound (docs/ARCHITECTURE.md,
    /// "Deadlines"): past it the answer is `unavailable`, the outcome unknown, and the client
    /// retries with the same ids. A claim batch stuck on a dead Postgres link is abandoned at
    /// this bound, its connection dropped, and the template's next batch runs on another.
    pub deadline: Duration,
    /// The sold-out gate's bound (docs/ARCHITECTURE.md, "The sold-out gate"): once a
    /// template is sold out, this server refuses its claims without Redis, and stock that
    /// comes back through another server is admitted here again within this bound (stock
    /// this server gives back, at once). Zero turns the gate off: every claim reaches Redis.
    pub sold_out_recheck: Duration,
    /// The correct engine, or (feature `mutants`) a deliberately broken one.
    pub variant: Variant,
}

/// The default [`EngineConfig::sold_out_recheck`]: a sold-out template costs each server one
/// indexed Postgres read per bound, and a place given back elsewhere waits at most this long.
pub const DEFAULT_SOLD_OUT_RECHECK: Duration = Duration::from_millis(100);

/// The default [`EngineConfig::deadline`]: under the 5 s a shopper's client commonly waits,
/// and far above a healthy claim's latency (milliseconds), so only a store that stopped
/// answering reaches it.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(4);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            namespace: "coupon".to_owned(),
            persistence: Persistence::Sync,
            redeem_lock: true,
            lock_ttl: Duration::from_secs(30),
            lock_wait: Duration::from_secs(2),
            checkout_lock_ttl: Duration::from_secs(15 * 60),
            lock_sweep_every: Duration::from_secs(10),
            idempotency_ttl: Duration::from_secs(24 * 3600),
            batch_size: 512,
            batch_interval: Duration::from_millis(10),
            stale_pending_after: Duration::from_secs(5),
            group_commit_max: 512,
            group_commit_wait: Duration::ZERO,
            identity_check_interval: Duration::from_secs(1),
            deadline: DEFAULT_DEADLINE,
            sold_out_recheck: DEFAULT_SOLD_OUT_RECHECK,
            variant: Variant::Correct,
        }
    }
}
