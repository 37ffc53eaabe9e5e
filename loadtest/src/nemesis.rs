//! Faults injected during a load run. `redis-stale-restart` makes the run's own Redis lie:
//! it snapshots Redis mid-sale (once the hot template's stock has dropped by a fifth), lets
//! the sale go on, then SIGKILLs Redis and restarts it from that snapshot, so it comes back
//! with stale but present counters — the restart from an older RDB that sold 140 coupons of
//! 100 in round 1. A sync run must still PASS; the report shows when each step happened.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::ValueEnum;
use coupon_engine::{CouponEngine, testkit::local::LocalRedis};
use serde::{Deserialize, Serialize};
use tokio::{sync::Mutex, task::JoinHandle};
use uuid::Uuid;

/// The faults a run can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NemesisKind {
    /// Restart the run's own Redis from a snapshot taken mid-sale.
    RedisStaleRestart,
}

/// One step of a fault, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NemesisEvent {
    /// Seconds after the load started.
    pub at_secs: f64,
    /// What was done.
    pub what: String,
}

/// What the nemesis acts on.
pub(crate) struct Target {
    /// The in-process engine (to watch the hot template's stock).
    pub engine: CouponEngine,
    /// The run's own Redis.
    pub redis: Arc<Mutex<LocalRedis>>,
    /// The hot template.
    pub template: Uuid,
    /// Its stock.
    pub total_stock: i64,
}

/// Starts the fault alongside the load; `run_for` is the planned length of the load.
pub(crate) fn spawn(
    kind: NemesisKind,
    target: Target,
    run_for: Duration,
) -> JoinHandle<Vec<NemesisEvent>> {
    tokio::spawn(async move {
        match kind {
            NemesisKind::RedisStaleRestart => stale_restart(target, run_for).await,
        }
    })
}

async fn stale_restart(t: Target, run_for: Duration) -> Vec<NemesisEvent> {
    let start = Instant::now();
    let mut events = Vec::new();
    let mut note = |what: String| {
        tracing::info!(at_secs = start.elapsed().as_secs_f64(), %what, "nemesis");
        events.push(NemesisEvent {
            at_secs: start.elapsed().as_secs_f64(),
            what,
        });
    };
    // Mid-sale: once a fifth of the stock is gone (or a third of the run has passed).
    let threshold = t.total_stock - (t.total_stock / 5).max(1);
    let mut stock_then = None;
    while start.elapsed() < run_for / 3 {
        stock_then = t.engine.remaining_stock(t.template).await.ok().flatten();
        if stock_then.is_some_and(|s| s <= threshold) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let redis = t.redis.clone();
    let rdb = match tokio::task::spawn_blocking(move || redis.blocking_lock().snapshot_rdb()).await
    {
        Ok(Ok(rdb)) => rdb,
        other => {
            note(format!("snapshot failed: {other:?}"));
            return events;
        }
    };
    note(format!(
        "RDB snapshot taken (redis stock then: {})",
        stock_then.map_or("unknown".into(), |s| s.to_string())
    ));
    tokio::time::sleep((run_for / 2).saturating_sub(start.elapsed())).await;
    let stock_before = t.engine.remaining_stock(t.template).await.ok().flatten();
    let redis = t.redis.clone();
    let restarted =
        tokio::task::spawn_blocking(move || redis.blocking_lock().restart_from_rdb(&rdb)).await;
    let stock_after = t.engine.remaining_stock(t.template).await.ok().flatten();
    match restarted {
        Ok(Ok(())) => note(format!(
            "redis SIGKILLed and restarted from the snapshot: stock {} before, {} (stale) after",
            stock_before.map_or("unknown".into(), |s| s.to_string()),
            stock_after.map_or("unknown".into(), |s| s.to_string()),
        )),
        other => note(format!("restart failed: {other:?}")),
    }
    events
}
