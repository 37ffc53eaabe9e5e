//! Faults injected during a load run. `redis-stale-restart` makes the run's own Redis lie:
//! it snapshots Redis mid-sale (once the hot template's stock has dropped by a fifth), lets
//! the sale go on, then SIGKILLs Redis and restarts it from that snapshot, so it comes back
//! with stale but present counters — the restart from an older RDB that sold 140 coupons of
//! 100 in round 1. `redis-master-kill` runs on a Redis Cluster of the run's own and, at the
//! same mid-sale point, SIGKILLs the master owning the hot template's slot: its replica takes
//! over (losing whatever was not yet replicated), then the killed node is restarted and
//! rejoins as a replica. A sync run must still PASS; the report shows when each step happened.

mod grey;
mod slot_migration;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use clap::ValueEnum;
use coupon_engine::{CouponEngine, domain::ids::TemplateId};
use coupon_testkit::{local::LocalRedis, pg_failover::Replication, redis_cluster::LocalCluster};
use serde::{Deserialize, Serialize};
use tokio::{sync::Mutex, task::JoinHandle};

use crate::own_stores::OwnRedis;

/// The faults a run can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NemesisKind {
    /// Restart the run's own Redis from a snapshot taken mid-sale.
    RedisStaleRestart,
    /// Kill the master owning the hot template's slot on the run's own cluster mid-sale.
    RedisMasterKill,
    /// Reshard the hot template's slot to another master of the run's own cluster mid-sale.
    SlotMigration,
    /// Blackhole the servers' link to the run's own Postgres (bytes held, nothing reset)
    /// mid-sale for longer than the request deadline, then heal it.
    PgBlackhole,
    /// Blackhole the servers' link to the run's own Redis mid-sale, then heal it.
    RedisBlackhole,
    /// SIGSTOP the run's own Postgres (postmaster and backends) mid-sale past the deadline,
    /// then SIGCONT it.
    PgPause,
    /// Blackhole the first `coupon-server`'s link to the run's own Postgres mid-sale, the
    /// other servers of `--servers N` (N >= 2) left on the right side, then heal it: a
    /// partition of one server while the others go on.
    PgPartitionOne,
    /// SIGKILL one `coupon-server` of `--servers N` (N >= 2) mid-sale, batches in flight,
    /// and start it again.
    ServerKill,
    /// Run `coupon-server`s of `--servers N` (N >= 2) with their wall clocks off (libfaketime:
    /// the second 2 s fast, the third 2 s slow) on a sale whose claim window opens and closes
    /// during the run; no coupon may be granted outside the window by the true clock.
    ClockSkew,
    /// Run on a Postgres primary with a streaming standby of the run's own (reached through
    /// a proxy standing for a VIP); mid-sale, hold the replication link, stop the primary,
    /// promote the standby and move the VIP to it.
    PgFailover,
}

/// How the run's own Postgres primary replicates to its standby (`--pg-replication`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PgReplication {
    /// A commit waits for the standby: a failover loses nothing acknowledged.
    Sync,
    /// A commit does not wait: a failover loses what the standby had not received.
    Async,
}

/// How far a skewed server's clock is off (`--nemesis clock-skew`).
pub(crate) const SKEW: &str = "2s";
/// How long a grey fault lasts: past the servers' default deadline (4 s), so claims must
/// answer 503 within it rather than wait.
pub(crate) const GREY_HOLD: Duration = Duration::from_secs(5);

impl NemesisKind {
    /// True if the fault needs a Redis Cluster of the run's own (else a `redis-server`).
    pub(crate) fn needs_cluster(self) -> bool {
        matches!(self, Self::RedisMasterKill | Self::SlotMigration)
    }

    /// The name on the command line (`pg-blackhole`, …).
    pub(crate) fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }

    /// True if the fault acts on `coupon-server` processes (`--servers N`, N >= 2).
    pub(crate) fn needs_servers(self) -> bool {
        matches!(
            self,
            Self::ServerKill | Self::ClockSkew | Self::PgPartitionOne
        )
    }

    /// The stores and links the fault needs under the servers.
    pub(crate) fn grey_plan(
        self,
        servers: Option<usize>,
        replication: PgReplication,
    ) -> crate::own_stores::GreyPlan {
        let mut plan = crate::own_stores::GreyPlan::default();
        match self {
            Self::PgFailover => {
                plan.replicated_postgres = Some(match replication {
                    PgReplication::Sync => Replication::Synchronous,
                    PgReplication::Async => Replication::Asynchronous,
                })
            }
            Self::PgBlackhole => {
                plan.own_postgres = true;
                plan.pg_proxy = true;
            }
            Self::RedisBlackhole => plan.redis_proxy = true,
            Self::PgPause => plan.own_postgres = true,
            Self::PgPartitionOne => {
                plan.own_postgres = true;
                plan.partition_first = true;
            }
            Self::ClockSkew => {
                let n = servers.unwrap_or(0);
                plan.skews = [(1, format!("+{SKEW}")), (2, format!("-{SKEW}"))]
                    .into_iter()
                    .filter(|(i, _)| *i < n)
                    .collect();
            }
            Self::RedisStaleRestart
            | Self::RedisMasterKill
            | Self::SlotMigration
            | Self::ServerKill => {}
        }
        plan
    }
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
    /// Whether this step began a fault or healed it (for the time to recover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<Mark>,
}

/// A step that begins a fault or ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mark {
    /// The fault began.
    Fault,
    /// The fault was healed.
    Heal,
}

/// What the nemesis acts on.
pub(crate) struct Target {
    /// The run's own Postgres and the links to the stores.
    pub grey: crate::own_stores::GreyStores,
    /// The `coupon-server` processes, when the run started some.
    pub fleet: Option<Arc<Mutex<crate::fleet::Fleet>>>,
    /// When the load began (Unix µs), so that steps are timed as the requests are.
    pub epoch_unix_us: u64,
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
            (
                NemesisKind::PgBlackhole
                | NemesisKind::RedisBlackhole
                | NemesisKind::PgPause
                | NemesisKind::PgPartitionOne
                | NemesisKind::PgFailover
                | NemesisKind::ServerKill,
                _,
            ) => grey::run(kind, target, run_for).await,
            (NemesisKind::ClockSkew, _) => {
                let mut log = Log::new(target.epoch_unix_us);
                log.note(format!(
                    "servers 2 and 3 (if any) run {SKEW} fast and {SKEW} slow under libfaketime; \
                     the hot template's claim window opens and closes during the run"
                ));
                log.events
            }
            (NemesisKind::RedisStaleRestart, OwnRedis::Node(r)) => {
                let r = r.clone();
                stale_restart(target, r, run_for).await
            }
            (NemesisKind::RedisMasterKill, OwnRedis::Cluster(c)) => {
                let c = c.clone();
                master_kill(target, c, run_for).await
            }
            (NemesisKind::SlotMigration, OwnRedis::Cluster(c)) => {
                let c = c.clone();
                slot_migration::run(target, c, run_for).await
            }
            _ => vec![NemesisEvent {
                at_secs: 0.0,
                what: format!("{kind:?} cannot act on this kind of Redis; nothing done"),
                failed: true,
                marks: None,
            }],
        }
    })
}

/// The steps of a fault, timed from the start of the load.
pub(crate) struct Log {
    start: Instant,
    pub(crate) events: Vec<NemesisEvent>,
}

impl Log {
    /// A log whose times count from `epoch_unix_us` (when the load began), as the requests'
    /// do; from now if that is unknown or in the future.
    pub(crate) fn new(epoch_unix_us: u64) -> Self {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let since = Duration::from_micros(now_us.saturating_sub(epoch_unix_us));
        let start = Instant::now()
            .checked_sub(if epoch_unix_us == 0 {
                Duration::ZERO
            } else {
                since
            })
            .unwrap_or_else(Instant::now);
        Self {
            start,
            events: Vec::new(),
        }
    }

    /// Seconds since the load began.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    pub(crate) fn note(&mut self, what: String) {
        self.push(what, false, None);
    }

    /// A step that begins (`Mark::Fault`) or heals (`Mark::Heal`) the fault.
    pub(crate) fn mark(&mut self, what: String, mark: Mark) {
        self.push(what, false, Some(mark));
    }

    /// A step that could not be carried out.
    pub(crate) fn fail(&mut self, what: String) {
        self.push(what, true, None);
    }

    fn push(&mut self, what: String, failed: bool, marks: Option<Mark>) {
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
            marks,
        });
    }
}

/// Waits until the sale is under way (a fifth of the hot template's stock gone, or a third
/// of the run passed); returns Redis's stock then.
pub(crate) async fn mid_sale(t: &Target, log: &Log, run_for: Duration) -> Option<i64> {
    let threshold = t.total_stock - (t.total_stock / 5).max(1);
    let mut stock_then = None;
    while log.elapsed() < run_for / 3 {
        stock_then = t.engine.remaining_stock(t.template).await.ok().flatten();
        if stock_then.is_some_and(|s| s <= threshold) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stock_then
}

pub(crate) fn or_unknown(n: Option<i64>) -> String {
    n.map_or("unknown".into(), |s| s.to_string())
}

async fn master_kill(
    t: Target,
    cluster: Arc<Mutex<LocalCluster>>,
    run_for: Duration,
) -> Vec<NemesisEvent> {
    let mut log = Log::new(t.epoch_unix_us);
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
    tokio::time::sleep(run_for.saturating_sub(log.elapsed())).await;
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
    let mut log = Log::new(t.epoch_unix_us);
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
    tokio::time::sleep((run_for / 2).saturating_sub(log.elapsed())).await;
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
