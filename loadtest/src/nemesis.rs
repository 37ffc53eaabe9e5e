//! Faults injected during a load run. `redis-stale-restart` makes the run's own Redis lie:
//! it snapshots Redis mid-sale (once the hot template's stock has dropped by a fifth), lets
//! the sale go on, then SIGKILLs Redis and restarts it from that snapshot, so it comes back
//! with stale but present counters — the restart from an older RDB that sold 140 coupons of
//! 100 in round 1. `redis-master-kill` runs on a Redis Cluster of the run's own and, at the
//! same mid-sale point, SIGKILLs the master owning the hot template's slot: its replica takes
//! over (losing whatever was not yet replicated), then the killed node is restarted and
//! rejoins as a replica. A sync run must still PASS; the report shows when each step happened.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::ValueEnum;
use coupon_engine::{CouponEngine, domain::ids::TemplateId};
use coupon_testkit::{local::LocalRedis, redis_cluster::LocalCluster};
use serde::{Deserialize, Serialize};
use tokio::{sync::Mutex, task::JoinHandle};

/// The faults a run can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NemesisKind {
    /// Restart the run's own Redis from a snapshot taken mid-sale.
    RedisStaleRestart,
    /// Kill the master owning the hot template's slot on the run's own cluster mid-sale.
    RedisMasterKill,
}

impl NemesisKind {
    /// True if the fault needs a Redis Cluster of the run's own (else a `redis-server`).
    pub(crate) fn needs_cluster(self) -> bool {
        self == Self::RedisMasterKill
    }
}

/// The run's own Redis, which a fault may kill.
#[derive(Clone)]
pub(crate) enum OwnRedis {
    /// One `redis-server`.
    Node(Arc<Mutex<LocalRedis>>),
    /// A cluster of 3 masters + 3 replicas.
    Cluster(Arc<Mutex<LocalCluster>>),
}

/// One step of a fault, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NemesisEvent {
    /// Seconds after the load started.
    pub at_secs: f64,
    /// What was done.
    pub what: String,
    /// The step could not be carried out (the run then fails: it did not test the fault).
    #[serde(default)]
    pub failed: bool,
}

/// What the nemesis acts on.
pub(crate) struct Target {
    /// The in-process engine (to watch the hot template's stock).
    pub engine: CouponEngine,
    /// The run's own Redis.
    pub redis: OwnRedis,
    /// The hot template.
    pub template: TemplateId,
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
        match (kind, &target.redis) {
            (NemesisKind::RedisStaleRestart, OwnRedis::Node(r)) => {
                let r = r.clone();
                stale_restart(target, r, run_for).await
            }
            (NemesisKind::RedisMasterKill, OwnRedis::Cluster(c)) => {
                let c = c.clone();
                master_kill(target, c, run_for).await
            }
            _ => vec![NemesisEvent {
                at_secs: 0.0,
                what: format!("{kind:?} cannot act on this kind of Redis; nothing done"),
                failed: true,
            }],
        }
    })
}

/// The steps of a fault, timed from the start of the load.
struct Log {
    start: Instant,
    events: Vec<NemesisEvent>,
}

impl Log {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Vec::new(),
        }
    }

    fn note(&mut self, what: String) {
        self.push(what, false);
    }

    /// A step that could not be carried out.
    fn fail(&mut self, what: String) {
        self.push(what, true);
    }

    fn push(&mut self, what: String, failed: bool) {
        let at_secs = self.start.elapsed().as_secs_f64();
        if failed {
            tracing::warn!(at_secs, %what, "nemesis step failed");
        } else {
            tracing::info!(at_secs, %what, "nemesis");
        }
        self.events.push(NemesisEvent {
            at_secs,
            what,
            failed,
        });
    }
}

/// Waits until the sale is under way (a fifth of the hot template's stock gone, or a third
/// of the run passed); returns Redis's stock then.
async fn mid_sale(t: &Target, log: &Log, run_for: Duration) -> Option<i64> {
    let threshold = t.total_stock - (t.total_stock / 5).max(1);
    let mut stock_then = None;
    while log.start.elapsed() < run_for / 3 {
        stock_then = t.engine.remaining_stock(t.template).await.ok().flatten();
        if stock_then.is_some_and(|s| s <= threshold) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stock_then
}

fn or_unknown(n: Option<i64>) -> String {
    n.map_or("unknown".into(), |s| s.to_string())
}

async fn master_kill(
    t: Target,
    cluster: Arc<Mutex<LocalCluster>>,
    run_for: Duration,
) -> Vec<NemesisEvent> {
    let mut log = Log::new();
    let stock_then = mid_sale(&t, &log, run_for).await;
    let key = t.engine.redis().keys(t.template).stock;
    let c = cluster.clone();
    let killed_at = Instant::now();
    match tokio::task::spawn_blocking(move || c.blocking_lock().kill_master_of(&key)).await {
        Ok(Ok(f)) => log.note(format!(
            "master :{} of the hot template's slot SIGKILLed (redis stock then: {}); replica \
             :{} took over {:.1} s later",
            f.old_master,
            or_unknown(stock_then),
            f.new_master,
            killed_at.elapsed().as_secs_f64()
        )),
        other => {
            log.fail(format!("master kill failed: {other:?}"));
            return log.events;
        }
    }
    // The killed node rejoins (as a replica) only once the load is over: a node restarted
    // mid-sale first claims its old slots until gossip corrects it (see the README).
    tokio::time::sleep(run_for.saturating_sub(log.start.elapsed())).await;
    let c = cluster.clone();
    match tokio::task::spawn_blocking(move || c.blocking_lock().revive()).await {
        Ok(Ok(())) => log.note("the killed master restarted and rejoined as a replica".into()),
        other => log.fail(format!("restarting the killed master failed: {other:?}")),
    }
    log.events
}

async fn stale_restart(
    t: Target,
    redis: Arc<Mutex<LocalRedis>>,
    run_for: Duration,
) -> Vec<NemesisEvent> {
    let mut log = Log::new();
    let stock_then = mid_sale(&t, &log, run_for).await;
    let r = redis.clone();
    let rdb = match tokio::task::spawn_blocking(move || r.blocking_lock().snapshot_rdb()).await {
        Ok(Ok(rdb)) => rdb,
        other => {
            log.fail(format!("snapshot failed: {other:?}"));
            return log.events;
        }
    };
    log.note(format!(
        "RDB snapshot taken (redis stock then: {})",
        or_unknown(stock_then)
    ));
    tokio::time::sleep((run_for / 2).saturating_sub(log.start.elapsed())).await;
    let stock_before = t.engine.remaining_stock(t.template).await.ok().flatten();
    let restarted =
        tokio::task::spawn_blocking(move || redis.blocking_lock().restart_from_rdb(&rdb)).await;
    let stock_after = t.engine.remaining_stock(t.template).await.ok().flatten();
    match restarted {
        Ok(Ok(())) => log.note(format!(
            "redis SIGKILLed and restarted from the snapshot: stock {} before, {} (stale) after",
            or_unknown(stock_before),
            or_unknown(stock_after),
        )),
        other => log.fail(format!("restart failed: {other:?}")),
    }
    log.events
}
