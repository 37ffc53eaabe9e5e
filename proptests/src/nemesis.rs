//! The nemesis (docs/ARCHITECTURE.md, "Failure model"): applies a fault schedule to a running
//! case. Faults that kill or pause Redis, or flush its scripts, act only on the
//! `redis-server` the case started itself; failovers only on the case's own cluster.

use std::{sync::Arc, time::Duration};

use coupon_engine::{
    CouponEngine,
    domain::ids::TemplateId,
    failpoint::{FailAction, Failpoint, Gate},
};
use coupon_testkit::{
    ProvisionError,
    fault_proxy::{FaultProxy, LinkMode},
    local::{LocalPostgres, LocalRedis},
    pg_failover::ReplicatedPostgres,
    redis_cluster::{LocalCluster, SlotMigration},
};
use sqlx::Connection;
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::{
    engine_process::EngineProcess,
    scenario::{EvictedKey, Fault, TimedFault},
};

/// What the nemesis acts on.
pub struct Target {
    /// The engine under test.
    pub engine: CouponEngine,
    /// Template ids by scenario index.
    pub templates: Vec<TemplateId>,
    /// The case's own Redis (present whenever the schedule has faults and no failover).
    pub redis: Option<Arc<Mutex<LocalRedis>>>,
    /// The case's own cluster (present whenever the schedule has a failover).
    pub cluster: Option<Arc<Mutex<LocalCluster>>>,
    /// The case's own Postgres (present whenever the schedule crashes Postgres).
    pub postgres: Option<Arc<LocalPostgres>>,
    /// The case's own primary and standby (present whenever the schedule fails over).
    pub replicated_postgres: Option<Arc<ReplicatedPostgres>>,
    /// URL of the case's own database.
    pub database_url: String,
    /// The engine's link to Postgres (present whenever the schedule has a link fault).
    pub pg_link: Option<Arc<FaultProxy>>,
    /// The engine's link to Redis (present whenever the schedule has a link fault).
    pub redis_link: Option<Arc<FaultProxy>>,
    /// The case's second engine (present whenever the schedule kills or partitions one).
    pub second: Option<Arc<EngineProcess>>,
    /// The second engine's own link to Postgres (present whenever the schedule partitions it).
    pub second_pg_link: Option<Arc<FaultProxy>>,
    /// Slot migrations begun before the processes were released, by template index.
    pub migrations: std::sync::Mutex<Vec<(u32, SlotMigration)>>,
}

/// What the nemesis did to a case.
#[derive(Debug, Default)]
pub struct NemesisLog {
    /// Every step, in time order, with what it did or why it failed.
    pub steps: Vec<String>,
    /// The steps that failed: a case whose fault did not happen proves nothing about it.
    pub failed: Vec<String>,
}

/// Applies the schedule in time order.
pub async fn run(target: &Target, mut schedule: Vec<TimedFault>) -> NemesisLog {
    schedule.sort_by_key(|f| f.at_ms);
    let start = tokio::time::Instant::now();
    let mut log = NemesisLog::default();
    for f in schedule {
        tokio::time::sleep_until(start + Duration::from_millis(f.at_ms)).await;
        let step = match apply(target, &f.fault).await {
            Ok(done) => {
                tracing::info!(at_ms = f.at_ms, fault = ?f.fault, %done, "nemesis");
                format!("{}ms {:?}: {done}", f.at_ms, f.fault)
            }
            Err(e) => {
                tracing::warn!(at_ms = f.at_ms, fault = ?f.fault, error = %e, "nemesis step failed");
                let step = format!("{}ms {:?}: error: {e:#}", f.at_ms, f.fault);
                log.failed.push(step.clone());
                step
            }
        };
        log.steps.push(step);
    }
    log
}

/// Other sales' keys put in a migrating template's slot, half of them moved before the
/// processes start: the slot is then mid-migration with the template's keys on the source.
const OTHER_KEYS: usize = 200;
/// Keys per `MIGRATE` (`redis-cli --cluster reshard`'s default pipeline).
const KEYS_PER_MIGRATE: usize = 10;

/// Starts the faults that are under way when the processes are released (a slot
/// migrating); each step's account, or an error, goes to the log.
pub async fn before_release(target: &Target, schedule: &[TimedFault], log: &mut NemesisLog) {
    for f in schedule.iter().filter(|f| f.fault.starts_before_release()) {
        let Fault::MigrateSlot { template } = f.fault else {
            continue;
        };
        let step = match begin_migration(target, template).await {
            Ok(done) => format!("before the start {:?}: {done}", f.fault),
            Err(e) => {
                let step = format!("before the start {:?}: error: {e:#}", f.fault);
                log.failed.push(step.clone());
                step
            }
        };
        log.steps.push(step);
    }
}

async fn begin_migration(t: &Target, template: u32) -> anyhow::Result<String> {
    let id = template_id(t, template);
    let others: Vec<String> = (0..OTHER_KEYS)
        .map(|i| format!("another-sale:{{{id}}}:{i}"))
        .collect();
    let mut pipe = redis::pipe();
    for k in &others {
        pipe.set(k, 1).ignore();
    }
    pipe.query_async::<()>(&mut t.engine.redis().connection())
        .await?;
    let key = t.engine.redis().keys(id).stock;
    let m = blocking(own_cluster(t)?, move |c| c.begin_slot_migration(&key)).await?;
    let moving = m.clone();
    let half = others[..OTHER_KEYS / 2].to_vec();
    tokio::task::spawn_blocking(move || {
        half.chunks(KEYS_PER_MIGRATE)
            .try_for_each(|keys| moving.move_keys(keys))
    })
    .await??;
    let said = format!(
        "slot {} of template {template} migrating from :{} to :{}, {} of its other keys moved",
        m.slot,
        m.source,
        m.target,
        OTHER_KEYS / 2
    );
    t.migrations
        .lock()
        .map_err(|_| anyhow::anyhow!("migrations lock poisoned"))?
        .push((template, m));
    Ok(said)
}

/// Moves the rest of a migrating slot and hands it over.
async fn finish_migration(t: &Target, template: u32) -> anyhow::Result<String> {
    let m = {
        let mut migrations = t
            .migrations
            .lock()
            .map_err(|_| anyhow::anyhow!("migrations lock poisoned"))?;
        let at = migrations
            .iter()
            .position(|(i, _)| *i == template)
            .ok_or_else(|| anyhow::anyhow!("template {template}'s slot is not migrating"))?;
        migrations.remove(at).1
    };
    let done = tokio::task::spawn_blocking(move || {
        m.finish(KEYS_PER_MIGRATE, std::time::Instant::now())
            .map(|d| (m, d))
    })
    .await??;
    let (m, d) = done;
    Ok(format!(
        "the rest of slot {} moved ({} keys, {} per MIGRATE) and handed to :{}",
        m.slot, d.keys, KEYS_PER_MIGRATE, m.target
    ))
}

/// Undoes what may still be in force (armed failpoints, a paused Redis).
pub async fn heal(target: &Target) {
    let fp = target.engine.failpoints();
    for p in [
        Failpoint::ClaimAfterRedis,
        Failpoint::ClaimAfterPersist,
        Failpoint::RefundAfterCommit,
        Failpoint::RedeemAfterUpdate,
        Failpoint::RebuildAfterRedis,
        Failpoint::BatchBeforeDecide,
    ] {
        fp.disarm(p);
    }
    if let Some(r) = &target.redis {
        let _ = r.lock().await.signal("CONT");
    }
    for link in [&target.pg_link, &target.redis_link, &target.second_pg_link]
        .into_iter()
        .flatten()
    {
        link.set(LinkMode::Pass);
    }
    if let Some(pg) = target.postgres.clone() {
        let _ = tokio::task::spawn_blocking(move || pg.resume()).await;
    }
    let left: Vec<u32> = target
        .migrations
        .lock()
        .map(|m| m.iter().map(|(i, _)| *i).collect())
        .unwrap_or_default();
    for template in left {
        if let Err(e) = finish_migration(target, template).await {
            tracing::warn!(error = %e, "finishing a slot migration failed");
        }
    }
    if let Some(c) = &target.cluster
        && let Err(e) = blocking(c, |c| {
            c.release_buses();
            c.restore_replication()?;
            c.revive()
        })
        .await
    {
        tracing::warn!(error = %e, "healing the case's cluster failed");
    }
}

async fn apply(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    match fault {
        Fault::FailClaimAfterRedis { .. }
        | Fault::DelayClaimAfterRedis { .. }
        | Fault::FailClaimAfterPersist { .. }
        | Fault::FailRefundAfterCommit { .. }
        | Fault::FailRedeemAfterUpdate { .. } => failpoint(t, fault),
        Fault::KillRedis
        | Fault::PauseRedis { .. }
        | Fault::StaleRdbRestart { .. }
        | Fault::AofLossRestart { .. } => redis_process(t, fault).await,
        Fault::DropTemplateKeys { .. }
        | Fault::ScriptFlush
        | Fault::EvictKey { .. }
        | Fault::AbortRebuild { .. } => redis_data_retried(t, fault).await,
        Fault::KillSlotMaster { .. } | Fault::LaggingTakeover { .. } | Fault::HoldBus { .. } => {
            cluster(t, fault).await
        }
        Fault::MigrateSlot { template } => finish_migration(t, *template).await,
        Fault::TerminateBackends | Fault::CrashPostgres | Fault::FailOverPostgres => {
            postgres(t, fault).await
        }
        Fault::BlackholePostgres { .. }
        | Fault::BlackholeRedis { .. }
        | Fault::SlowPostgres { .. }
        | Fault::ThrottleRedis { .. }
        | Fault::PartitionSecondEngine { .. }
        | Fault::PausePostgres { .. } => grey(t, fault).await,
        Fault::KillEngine => kill_engine(t).await,
    }
}

/// How long the kill waits for the second engine to start a batch before killing it
/// anyway (a case whose claims all went to the first engine has no batch there).
const BATCH_WAIT: Duration = Duration::from_secs(2);

/// The second engine killed where its next claim batch is about to be decided, then
/// restarted on the same stores.
async fn kill_engine(t: &Target) -> anyhow::Result<String> {
    let process = t
        .second
        .clone()
        .ok_or_else(|| anyhow::anyhow!("this fault needs a second engine in the case"))?;
    let engine = process
        .engine()
        .ok_or_else(|| anyhow::anyhow!("the second engine is not running"))?;
    let gate = Gate::new();
    engine.failpoints().arm(
        Failpoint::BatchBeforeDecide,
        FailAction::Block(gate.clone()),
    );
    drop(engine);
    let mid_batch = tokio::time::timeout(BATCH_WAIT, gate.reached(1))
        .await
        .is_ok();
    process.kill();
    process.restart().await?;
    Ok(if mid_batch {
        "the second engine killed mid-batch, then restarted".to_owned()
    } else {
        format!(
            "the second engine killed (no batch of its own within {BATCH_WAIT:?}), then restarted"
        )
    })
}

/// Grey failures: a link that holds or slows every byte, a Postgres that stops answering.
/// Each heals itself after its span; [`heal`] heals whatever is left.
async fn grey(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    let link = |l: &Option<Arc<FaultProxy>>| {
        l.clone()
            .ok_or_else(|| anyhow::anyhow!("this fault needs a fault proxy in front of the store"))
    };
    Ok(match fault {
        Fault::BlackholePostgres { ms } | Fault::BlackholeRedis { ms } => {
            let (l, store) = match fault {
                Fault::BlackholePostgres { .. } => (link(&t.pg_link)?, "postgres"),
                _ => (link(&t.redis_link)?, "redis"),
            };
            l.set(LinkMode::Blackhole);
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            l.set(LinkMode::Pass);
            format!("the link to {store} blackholed {ms}ms, then healed")
        }
        Fault::SlowPostgres { latency_ms, ms } => {
            let l = link(&t.pg_link)?;
            l.set(LinkMode::Latency(Duration::from_millis(*latency_ms)));
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            l.set(LinkMode::Pass);
            format!("the link to postgres delayed {latency_ms}ms a chunk for {ms}ms")
        }
        Fault::ThrottleRedis { bytes_per_sec, ms } => {
            let l = link(&t.redis_link)?;
            l.set(LinkMode::Bandwidth(*bytes_per_sec));
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            l.set(LinkMode::Pass);
            format!("the link to redis limited to {bytes_per_sec} B/s for {ms}ms")
        }
        Fault::PartitionSecondEngine { ms } => {
            let l = link(&t.second_pg_link)?;
            l.set(LinkMode::Blackhole);
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            l.set(LinkMode::Pass);
            format!("the second engine alone cut off from postgres {ms}ms, then healed")
        }
        Fault::PausePostgres { ms } => {
            let pg = t
                .postgres
                .clone()
                .ok_or_else(|| anyhow::anyhow!("this fault needs the case's own Postgres"))?;
            let p = pg.clone();
            tokio::task::spawn_blocking(move || p.pause()).await??;
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            tokio::task::spawn_blocking(move || pg.resume()).await??;
            format!("postgres paused (SIGSTOP) {ms}ms, then resumed")
        }
        other => anyhow::bail!("not a grey fault: {other:?}"),
    })
}

/// Failpoints: the engine fails or stalls at a chosen step.
fn failpoint(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    let fp = t.engine.failpoints();
    Ok(match fault {
        Fault::FailClaimAfterRedis { n } => {
            arm(fp, Failpoint::ClaimAfterRedis, FailAction::Error(*n))
        }
        Fault::DelayClaimAfterRedis { ms } => arm(
            fp,
            Failpoint::ClaimAfterRedis,
            FailAction::Delay(Duration::from_millis(*ms)),
        ),
        Fault::FailClaimAfterPersist { n } => {
            arm(fp, Failpoint::ClaimAfterPersist, FailAction::Error(*n))
        }
        Fault::FailRefundAfterCommit { n } => {
            arm(fp, Failpoint::RefundAfterCommit, FailAction::Error(*n))
        }
        Fault::FailRedeemAfterUpdate { n } => {
            arm(fp, Failpoint::RedeemAfterUpdate, FailAction::Error(*n))
        }
        other => anyhow::bail!("not a failpoint fault: {other:?}"),
    })
}

/// The case's own redis-server killed, paused, or restarted from an older state.
async fn redis_process(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    Ok(match fault {
        Fault::KillRedis => {
            blocking(own_redis(t)?, LocalRedis::restart).await?;
            "redis killed (SIGKILL) and restarted empty".into()
        }
        Fault::PauseRedis { ms } => {
            let r = own_redis(t)?;
            r.lock().await.signal("STOP")?;
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            r.lock().await.signal("CONT")?;
            format!("redis paused {ms}ms")
        }
        Fault::StaleRdbRestart {
            lag_ms,
            warm_scripts,
        } => {
            let r = own_redis(t)?.clone();
            let rdb = blocking(&r, |r| r.snapshot_rdb()).await?;
            tokio::time::sleep(Duration::from_millis(*lag_ms)).await;
            blocking(&r, move |r| r.restart_from_rdb(&rdb)).await?;
            let scripts = warm_up(t, &r, *warm_scripts).await?;
            format!("redis restarted from an RDB snapshot taken {lag_ms}ms earlier, {scripts}")
        }
        Fault::AofLossRestart {
            lag_ms,
            warm_scripts,
        } => {
            let r = own_redis(t)?.clone();
            let aof = blocking(&r, |r| r.copy_aof()).await?;
            tokio::time::sleep(Duration::from_millis(*lag_ms)).await;
            blocking(&r, move |r| r.restart_from_aof(&aof)).await?;
            let scripts = warm_up(t, &r, *warm_scripts).await?;
            format!("redis restarted from an AOF copied {lag_ms}ms earlier, {scripts}")
        }
        other => anyhow::bail!("not a redis process fault: {other:?}"),
    })
}

/// A restarted server holds no scripts, and the engine's first claim on it meets NOSCRIPT,
/// which has the engine check it before it admits. `warm` plays a server with stale keys
/// that gives no such sign, by loading the engine's current scripts into it right after
/// the restart (the engine retries 50 ms after the dropped connection, so this almost
/// always comes first). A restart or failover seldom does that by itself (a check renews the
/// claim script); older keys restored into a running server would, and only Postgres's
/// decision stands between such a server and an oversell.
async fn warm_up(
    t: &Target,
    r: &Arc<Mutex<LocalRedis>>,
    warm: bool,
) -> anyhow::Result<&'static str> {
    if !warm {
        return Ok("no scripts");
    }
    let url = r.lock().await.url();
    load_engine_scripts(t, &url).await?;
    Ok("its scripts loaded by another client")
}

/// Loads the engine's current scripts into the server at `url`, from a connection of the
/// nemesis's own.
async fn load_engine_scripts(t: &Target, url: &str) -> anyhow::Result<()> {
    t.engine.redis().load_scripts_on(url).await?;
    Ok(())
}

/// The data faults go through the engine's connection, which the fault before may just
/// have broken (a restart): as the engine's own commands do, they try again once it is back.
/// Each is idempotent (a key deleted twice, scripts flushed twice).
async fn redis_data_retried(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    let mut attempt = 0;
    loop {
        match redis_data(t, fault).await {
            Err(e) if attempt < 3 && is_connection_error(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

fn is_connection_error(e: &anyhow::Error) -> bool {
    e.downcast_ref::<redis::RedisError>()
        .is_some_and(|e| e.is_io_error() || e.is_connection_dropped() || e.is_timeout())
}

/// Redis keeps running but loses keys or scripts; or a rebuild dies after its Redis write.
async fn redis_data(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    let fp = t.engine.failpoints();
    Ok(match fault {
        Fault::DropTemplateKeys { template } => {
            let n = t
                .engine
                .redis()
                .drop_template_keys(template_id(t, *template))
                .await?;
            format!("dropped {n} keys")
        }
        Fault::ScriptFlush => {
            if t.cluster.is_none() {
                own_redis(t)?;
            }
            redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async::<()>(&mut t.engine.redis().connection())
                .await?;
            "scripts flushed".into()
        }
        Fault::EvictKey { template, key } => {
            let id = template_id(t, *template);
            let keys = t.engine.redis().keys(id);
            let name = match key {
                EvictedKey::Claimed => keys.claimed.clone(),
                EvictedKey::Epoch => keys.epoch.clone(),
                EvictedKey::Req(n) => {
                    // One request's record lost, as an evicted per-request key once was.
                    let n = t
                        .engine
                        .redis()
                        .drop_request_record(id, &format!("r{n}"))
                        .await?;
                    return Ok(format!("evicted {key:?} ({n} record)"));
                }
            };
            let n: i64 = redis::cmd("DEL")
                .arg(&name)
                .query_async(&mut t.engine.redis().connection())
                .await?;
            format!("evicted {key:?} ({n} key)")
        }
        Fault::AbortRebuild { template } => {
            fp.arm(Failpoint::RebuildAfterRedis, FailAction::Error(1));
            let n = t
                .engine
                .redis()
                .drop_template_keys(template_id(t, *template))
                .await?;
            format!("dropped {n} keys; the next rebuild dies after its Redis write")
        }
        other => anyhow::bail!("not a redis data fault: {other:?}"),
    })
}

/// Failovers of the case's own Redis Cluster.
async fn cluster(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    Ok(match fault {
        Fault::KillSlotMaster { template } => {
            let key = t.engine.redis().keys(template_id(t, *template)).stock;
            let f = blocking(own_cluster(t)?, move |c| {
                let f = c.kill_master_of(&key)?;
                c.revive()?;
                Ok(f)
            })
            .await?;
            format!(
                "master :{} of template {template}'s slot SIGKILLed; replica :{} took over; \
                 the old master rejoined as its replica",
                f.old_master, f.new_master
            )
        }
        Fault::LaggingTakeover {
            template,
            lag_ms,
            warm_scripts,
        } => {
            let key = t.engine.redis().keys(template_id(t, *template)).stock;
            let c = own_cluster(t)?.clone();
            let replica = blocking(&c, move |c| c.cut_replication(&key)).await?;
            if *warm_scripts {
                load_engine_scripts(t, &format!("redis://127.0.0.1:{replica}/")).await?;
            }
            tokio::time::sleep(Duration::from_millis(*lag_ms)).await;
            let f = blocking(&c, move |c| c.takeover(replica)).await?;
            blocking(&c, |c| c.restore_replication()).await?;
            format!(
                "replication of :{} cut for {lag_ms}ms, then it took over from :{} \
                 (CLUSTER FAILOVER TAKEOVER){}",
                f.new_master,
                f.old_master,
                if *warm_scripts {
                    ", holding the engine's scripts"
                } else {
                    ""
                }
            )
        }
        Fault::HoldBus { template, ms } => {
            let key = t.engine.redis().keys(template_id(t, *template)).stock;
            let c = own_cluster(t)?.clone();
            let master = blocking(&c, move |c| c.hold_bus_of(&key)).await?;
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            blocking(&c, |c| {
                c.release_buses();
                Ok(())
            })
            .await?;
            format!(
                "the bus of master :{master} (template {template}'s slot) held {ms}ms from its peers, then released"
            )
        }
        other => anyhow::bail!("not a cluster fault: {other:?}"),
    })
}

/// The case's Postgres loses its connections or crashes.
async fn postgres(t: &Target, fault: &Fault) -> anyhow::Result<String> {
    Ok(match fault {
        Fault::TerminateBackends => {
            let mut conn = sqlx::PgConnection::connect(&t.database_url).await?;
            let n: i64 = sqlx::query_scalar(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(&mut conn)
            .await?;
            format!("terminated {n} backends")
        }
        Fault::CrashPostgres => {
            let pg = t
                .postgres
                .clone()
                .ok_or_else(|| anyhow::anyhow!("this fault needs the case's own Postgres"))?;
            let started = tokio::time::Instant::now();
            tokio::task::spawn_blocking(move || pg.crash_and_restart()).await??;
            format!(
                "Postgres shut down immediately and back through crash recovery in {:?}",
                started.elapsed()
            )
        }
        Fault::FailOverPostgres => {
            let pair = t.replicated_postgres.clone().ok_or_else(|| {
                anyhow::anyhow!("this fault needs the case's own primary and standby")
            })?;
            let done = tokio::task::spawn_blocking(move || pair.fail_over()).await??;
            format!(
                "primary {} stopped immediately, standby {} promoted in {:?}, the engine's \
                 address moved to it",
                done.old_primary, done.new_primary, done.promoted_in
            )
        }
        other => anyhow::bail!("not a postgres fault: {other:?}"),
    })
}

fn template_id(t: &Target, index: u32) -> TemplateId {
    t.templates
        .get(index as usize)
        .copied()
        .unwrap_or_else(|| Uuid::nil().into())
}

/// Runs a blocking operation on the case's own Redis or cluster off the async workers.
async fn blocking<R: Send + 'static, T: Send + 'static>(
    r: &Arc<Mutex<R>>,
    f: impl FnOnce(&mut R) -> Result<T, ProvisionError> + Send + 'static,
) -> anyhow::Result<T> {
    let r = r.clone();
    Ok(tokio::task::spawn_blocking(move || f(&mut r.blocking_lock())).await??)
}

fn arm(fp: &coupon_engine::failpoint::Failpoints, point: Failpoint, action: FailAction) -> String {
    let said = format!("armed {point:?} with {action:?}");
    fp.arm(point, action);
    said
}

fn own_redis(t: &Target) -> anyhow::Result<&Arc<Mutex<LocalRedis>>> {
    t.redis
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("this fault needs the case's own Redis"))
}

fn own_cluster(t: &Target) -> anyhow::Result<&Arc<Mutex<LocalCluster>>> {
    t.cluster
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("this fault needs the case's own cluster"))
}
