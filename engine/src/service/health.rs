//! What `/healthz` reports (docs/ARCHITECTURE.md, "Deadlines"): each store probed with a
//! bound of its own, side by side, so a store that stopped answering is named as such
//! instead of making the probe itself hang, and a slow one is told apart from a down one.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::CouponEngine;

/// How long one store's probe may take before the store is reported down.
pub const PROBE_LIMIT: Duration = Duration::from_secs(1);
/// A probe slower than this reports its store slow (degraded, still serving).
pub const SLOW_AFTER: Duration = Duration::from_millis(250);

/// One store's state as the probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreState {
    /// Answered within [`SLOW_AFTER`].
    Ok,
    /// Answered, but slower than [`SLOW_AFTER`].
    Slow,
    /// No answer within [`PROBE_LIMIT`], or an error.
    Down,
}

/// One store's probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreHealth {
    /// What the probe found.
    pub state: StoreState,
    /// How long the probe took (the limit when it gave up), milliseconds.
    pub latency_ms: u64,
    /// Why it is down (an error or the limit); None when it answered.
    pub reason: Option<String>,
}

impl StoreHealth {
    fn answered(took: Duration) -> Self {
        Self {
            state: if took > SLOW_AFTER {
                StoreState::Slow
            } else {
                StoreState::Ok
            },
            latency_ms: took.as_millis() as u64,
            reason: None,
        }
    }

    fn down(took: Duration, reason: impl Into<String>) -> Self {
        Self {
            state: StoreState::Down,
            latency_ms: took.as_millis() as u64,
            reason: Some(reason.into()),
        }
    }

    fn summary(&self, name: &str) -> String {
        match (&self.state, &self.reason) {
            (StoreState::Down, Some(why)) => format!("{name} is down ({why})"),
            (state, _) => format!("{name} {state:?} ({} ms)", self.latency_ms).to_lowercase(),
        }
    }
}

/// Both stores' probes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// The Redis probe (a PING).
    pub redis: StoreHealth,
    /// The Postgres probe (`SELECT 1` on a pool connection).
    pub postgres: StoreHealth,
}

impl HealthReport {
    /// True when a store is down: claims cannot be granted.
    pub fn down(&self) -> bool {
        self.redis.state == StoreState::Down || self.postgres.state == StoreState::Down
    }

    /// True when a store answers, but slowly.
    pub fn degraded(&self) -> bool {
        self.redis.state == StoreState::Slow || self.postgres.state == StoreState::Slow
    }

    /// One line naming each store's state, for a 503's message and the log.
    pub fn summary(&self) -> String {
        format!(
            "{}; {}",
            self.postgres.summary("postgres"),
            self.redis.summary("redis")
        )
    }
}

impl CouponEngine {
    /// Probes both stores side by side, each within [`PROBE_LIMIT`].
    pub async fn health_report(&self) -> HealthReport {
        let (redis, postgres) = tokio::join!(self.probe_redis(), self.probe_postgres());
        HealthReport { redis, postgres }
    }

    async fn probe_redis(&self) -> StoreHealth {
        let started = Instant::now();
        match tokio::time::timeout(PROBE_LIMIT, self.inner.redis.ping()).await {
            Ok(Ok(())) => StoreHealth::answered(started.elapsed()),
            Ok(Err(e)) => errored("redis", started, &e),
            Err(_) => StoreHealth::down(PROBE_LIMIT, no_answer()),
        }
    }

    async fn probe_postgres(&self) -> StoreHealth {
        let started = Instant::now();
        let mut conn = match tokio::time::timeout(PROBE_LIMIT, self.inner.pg.acquire()).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return errored("postgres", started, &e),
            Err(_) => return StoreHealth::down(PROBE_LIMIT, no_answer()),
        };
        let left = PROBE_LIMIT.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, sqlx::query("SELECT 1").execute(&mut *conn)).await {
            Ok(Ok(_)) => StoreHealth::answered(started.elapsed()),
            Ok(Err(e)) => errored("postgres", started, &e),
            Err(_) => {
                // The statement may still be in flight on a dead link: never back to the pool.
                drop(conn.detach());
                StoreHealth::down(PROBE_LIMIT, no_answer())
            }
        }
    }
}

/// A probe that failed: the error goes to the log, the report says only that it failed
/// (an error's text may carry internals a client must not see).
fn errored(store: &str, started: Instant, e: &dyn std::fmt::Display) -> StoreHealth {
    tracing::warn!(error = %e, store, "health probe failed");
    StoreHealth::down(started.elapsed(), "the probe failed; see the server log")
}

fn no_answer() -> String {
    format!("no answer within {} ms", PROBE_LIMIT.as_millis())
}
