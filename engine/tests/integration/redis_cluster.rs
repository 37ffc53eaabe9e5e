//! The engine on a Redis Cluster (3 masters + 3 replicas of the test's own, never a shared
//! server): scripts on every master and after their cache is flushed, a master killed so its
//! replica takes over, and a replica whose replication was cut promoted with `CLUSTER
//! FAILOVER TAKEOVER` — stale but present counters, as after a restart from an old snapshot.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{collections::HashSet, sync::Arc, time::Duration};

use coupon_engine::domain::ids::TemplateId;
use coupon_engine::{
    ClaimReceipt, EngineConfig, EngineError, NewTemplate, ReconcileOptions, RefundPolicy, Variant,
    store::postgres,
};
use coupon_testkit::{
    Backends, ProvisionError, TestEnv,
    local::RedisPersistence,
    redis_cluster::{Failover, LocalCluster},
    shared_backends,
};

use crate::{rid, uid};

pub(crate) type R = anyhow::Result<()>;

/// An engine on a cluster of its own. Fields drop in order: the environment cleans up its
/// keys while the cluster still runs.
pub(crate) struct OnCluster {
    pub(crate) env: TestEnv,
    pub(crate) cluster: Arc<std::sync::Mutex<LocalCluster>>,
}

impl OnCluster {
    pub(crate) async fn start(variant: Variant) -> anyhow::Result<Self> {
        Self::start_on(variant, false).await
    }

    /// [`Self::start`] on a cluster whose nodes' buses are reached through fault proxies.
    pub(crate) async fn start_with_bus_proxies(variant: Variant) -> anyhow::Result<Self> {
        Self::start_on(variant, true).await
    }

    async fn start_on(variant: Variant, bus_proxies: bool) -> anyhow::Result<Self> {
        let cluster = tokio::task::spawn_blocking(move || {
            if bus_proxies {
                LocalCluster::start_with_bus_proxies(RedisPersistence::None)
            } else {
                LocalCluster::start(RedisPersistence::None)
            }
        })
        .await??;
        let shared = shared_backends().await?;
        let backends = Arc::new(Backends::with_target(
            cluster.target(),
            shared.database_url.clone(),
            None,
        ));
        // The identity watch is off: each test decides when a failover can be noticed.
        let config = EngineConfig {
            variant,
            identity_check_interval: Duration::ZERO,
            ..EngineConfig::default()
        };
        Ok(Self {
            env: TestEnv::on(backends, config).await?,
            cluster: Arc::new(std::sync::Mutex::new(cluster)),
        })
    }

    /// Runs a blocking operation on the cluster off the async workers.
    pub(crate) async fn on_cluster<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LocalCluster) -> Result<T, ProvisionError> + Send + 'static,
    ) -> anyhow::Result<T> {
        let c = self.cluster.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = c
                .lock()
                .map_err(|_| anyhow::anyhow!("cluster lock poisoned"))?;
            f(&mut guard).map_err(anyhow::Error::from)
        })
        .await?
    }

    pub(crate) async fn sale(&self, stock: i64) -> anyhow::Result<TemplateId> {
        let t = self
            .env
            .engine
            .create_template(NewTemplate::simple(
                "sale",
                stock,
                1,
                RefundPolicy::ReturnToStock,
            ))
            .await?;
        Ok(t.id)
    }

    /// Claims for users `prefix0..prefixN`, tolerating the unknown outcomes a failover
    /// causes; returns how many were granted.
    pub(crate) async fn claims(
        &self,
        t: TemplateId,
        prefix: &str,
        n: usize,
    ) -> anyhow::Result<usize> {
        let mut granted = 0;
        for i in 0..n {
            let user = format!("{prefix}{i}");
            match self.env.engine.claim(t, &uid(&user), &rid(&user)).await {
                Ok(_) => granted += 1,
                Err(EngineError::StockEmpty) => {}
                Err(unknown) if unknown.outcome_unknown() => {}
                Err(other) => return Err(other.into()),
            }
        }
        Ok(granted)
    }

    /// One claim, retried through the unknown outcomes a failover causes.
    pub(crate) async fn first_claim(&self, t: TemplateId) -> anyhow::Result<ClaimReceipt> {
        let mut last = None;
        for _ in 0..10 {
            match self.env.engine.claim(t, &uid("first"), &rid("first")).await {
                Ok(r) => return Ok(r),
                Err(unknown) if unknown.outcome_unknown() => last = Some(unknown),
                Err(other) => return Err(other.into()),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last.map_or_else(|| anyhow::anyhow!("no answer"), Into::into))
    }

    pub(crate) async fn issued(&self, t: TemplateId) -> anyhow::Result<i64> {
        let mut conn = self.env.engine.pool().acquire().await?;
        Ok(postgres::counted_per_user(&mut conn, t)
            .await?
            .iter()
            .map(|(_, n)| n)
            .sum())
    }

    /// Reconciles, then checks I1–I5.
    pub(crate) async fn audit_ok(&self, t: TemplateId) -> R {
        self.env
            .engine
            .reconcile_with(ReconcileOptions {
                min_pending_age: Duration::ZERO,
            })
            .await?;
        let audit = self.env.engine.audit(t).await?;
        assert!(audit.ok(), "{audit:?}");
        Ok(())
    }

    /// The template's slot owner: (master port, replica port if it has one).
    pub(crate) async fn owners(&self, t: TemplateId) -> anyhow::Result<(u16, Option<u16>)> {
        let key = self.env.engine.redis().keys(t).stock;
        self.on_cluster(move |c| c.owners(&key)).await
    }
}

/// Redis stock, riding out a connection a failover broke.
async fn stock(env: &TestEnv, t: TemplateId) -> anyhow::Result<Option<i64>> {
    let mut last = None;
    for _ in 0..40 {
        match env.engine.remaining_stock(t).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last.map_or_else(|| anyhow::anyhow!("no answer"), Into::into))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_master_runs_the_scripts_even_after_their_cache_is_flushed() -> R {
    let on = OnCluster::start(Variant::Correct).await?;
    // Templates until their slots cover every master.
    let mut templates = Vec::new();
    let mut masters = HashSet::new();
    while masters.len() < 3 {
        anyhow::ensure!(templates.len() < 64, "64 templates all on {masters:?}");
        let t = on.sale(5).await?;
        masters.insert(on.owners(t).await?.0);
        templates.push(t);
    }
    for (i, t) in templates.iter().enumerate() {
        assert_eq!(on.claims(*t, &format!("a{i}-"), 2).await?, 2);
    }
    // A promoted replica or a restarted master has an empty script cache: NOSCRIPT must
    // be answered by loading the script, on whichever master owns the slot.
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<()>(&mut on.env.engine.redis().connection())
        .await?;
    for (i, t) in templates.iter().enumerate() {
        assert_eq!(on.claims(*t, &format!("b{i}-"), 5).await?, 3);
        assert_eq!(stock(&on.env, *t).await?, Some(0));
        on.audit_ok(*t).await?;
    }
    drop(on);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_and_the_sale_sells_exactly_its_stock() -> R {
    let on = OnCluster::start(Variant::Correct).await?;
    let t = on.sale(100).await?;
    on.env.engine.check_redis_identity().await?;
    assert_eq!(on.claims(t, "a", 40).await?, 40);
    let key = on.env.engine.redis().keys(t).stock;
    let Failover {
        old_master,
        new_master,
    } = on.on_cluster(move |c| c.kill_master_of(&key)).await?;
    assert_ne!(old_master, new_master);
    assert_eq!(on.owners(t).await?.0, new_master);
    // A promoted replica is another Redis: its run_id changes the cluster's identity.
    assert!(
        on.env.engine.check_redis_identity().await?,
        "the failover must be noticed"
    );
    on.claims(t, "b", 100).await?;
    assert_eq!(on.issued(t).await?, 100);
    assert_eq!(stock(&on.env, t).await?, Some(0));
    on.audit_ok(t).await?;
    // The killed master comes back as a replica of the one that took its slots.
    on.on_cluster(LocalCluster::revive).await?;
    assert_eq!(on.owners(t).await?, (new_master, Some(old_master)));
    drop(on);
    Ok(())
}

/// An operator adds an empty master before resharding onto it: no data moved, so nothing
/// is rebuilt (round 2 counted every master a node listed, and rebuilt every template).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_master_added_changes_nothing_and_rebuilds_nothing() -> R {
    let on = OnCluster::start(Variant::Correct).await?;
    let t = on.sale(100).await?;
    on.env.engine.check_redis_identity().await?;
    assert_eq!(on.claims(t, "a", 10).await?, 10);
    let before = on.env.engine.redis().complete_epoch(t).await?;
    let added = on.on_cluster(LocalCluster::add_empty_master).await?;
    assert!(
        !on.env.engine.check_redis_identity().await?,
        "a master without slots (:{added}) is no change of where the data lives"
    );
    assert_eq!(
        on.env.engine.redis().complete_epoch(t).await?,
        before,
        "rebuilt for nothing"
    );
    assert_eq!(on.claims(t, "b", 10).await?, 10);
    on.audit_ok(t).await?;
    drop(on);
    Ok(())
}

/// Claims 30, cuts the replication of the template's master, claims 40 more (the replica
/// misses them), promotes the replica with TAKEOVER and claims 200 more: returns the
/// coupons Postgres holds. A `warm` replica is given the engine's current scripts first,
/// and so gives no sign of being new that would have it checked before it admits.
async fn sell_through_a_lagging_promotion(
    on: &OnCluster,
    warm: bool,
) -> anyhow::Result<(TemplateId, i64)> {
    let t = on.sale(100).await?;
    on.env.engine.check_redis_identity().await?;
    assert_eq!(on.claims(t, "a", 30).await?, 30);
    let key = on.env.engine.redis().keys(t).stock;
    let replica = on.on_cluster(move |c| c.cut_replication(&key)).await?;
    if warm {
        on.env
            .engine
            .redis()
            .load_scripts_on(&format!("redis://127.0.0.1:{replica}/"))
            .await?;
    }
    assert_eq!(on.claims(t, "b", 40).await?, 40);
    let failover = on.on_cluster(move |c| c.takeover(replica)).await?;
    assert_eq!(failover.new_master, replica);
    assert_eq!(
        stock(&on.env, t).await?,
        Some(70),
        "the promoted replica must hold the stale counters"
    );
    let first = on.first_claim(t).await?;
    // Checked before it admits, the promoted replica counts from the 30 left, not from 70.
    // One holding the scripts gives no sign, and counts on from its stale 70.
    assert_eq!(first.remaining_stock, if warm { 69 } else { 29 });
    on.claims(t, "c", 200).await?;
    on.on_cluster(|c| c.restore_replication()).await?;
    Ok((t, on.issued(t).await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_promoted_cannot_oversell() -> R {
    for warm in [false, true] {
        let on = OnCluster::start(Variant::Correct).await?;
        let (t, issued) = sell_through_a_lagging_promotion(&on, warm).await?;
        assert_eq!(
            issued, 100,
            "exactly total_stock coupons, whatever the promoted replica believed (warm {warm})"
        );
        on.audit_ok(t).await?;
        assert_eq!(stock(&on.env, t).await?, Some(0));
        drop(on);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_former_master_promoted_again_is_checked_before_it_admits() -> R {
    // Redis 7 keeps a master's scripts when it is demoted and resyncs as a replica, so the
    // claim script it was given as a master would let it admit, stale, when it is promoted
    // again, were the script's hash not renewed when a check finds another identity.
    let on = OnCluster::start(Variant::Correct).await?;
    let t = on.sale(100).await?;
    on.env.engine.check_redis_identity().await?;
    assert_eq!(on.claims(t, "a", 30).await?, 30);
    let key = on.env.engine.redis().keys(t).stock;
    let k = key.clone();
    let replica = on.on_cluster(move |c| c.cut_replication(&k)).await?;
    let first = on.on_cluster(move |c| c.takeover(replica)).await?;
    on.on_cluster(|c| c.restore_replication()).await?;
    assert_eq!(on.claims(t, "b", 20).await?, 20);
    // The first master, now the replica, misses the next ten, then takes over again.
    let k = key.clone();
    let again = on.on_cluster(move |c| c.cut_replication(&k)).await?;
    assert_eq!(again, first.old_master);
    assert_eq!(on.claims(t, "c", 10).await?, 10);
    on.on_cluster(move |c| c.takeover(again)).await?;
    assert_eq!(stock(&on.env, t).await?, Some(50), "stale: it missed ten");
    let claim = on.first_claim(t).await?;
    assert_eq!(
        claim.remaining_stock, 39,
        "counted from Postgres's 40, not from 50"
    );
    on.on_cluster(|c| c.restore_replication()).await?;
    on.audit_ok(t).await?;
    drop(on);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_one_behaviour_oversells_through_the_same_promotion() -> R {
    // Mutant D8 inserts whatever Redis admitted: the failure the test above rules out.
    let on = OnCluster::start(Variant::D8).await?;
    let (_, issued) = sell_through_a_lagging_promotion(&on, true).await?;
    assert!(issued > 100, "D8 must oversell here, issued {issued}");
    drop(on);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_in_flight_ride_out_a_killed_master() -> R {
    // A few hundred claims in flight when the master dies: the cluster connection must not
    // stay wedged afterwards (it did, answering every command with a timeout).
    let on = Arc::new(OnCluster::start(Variant::Correct).await?);
    let t = on.sale(100_000).await?;
    on.env.engine.check_redis_identity().await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..200 {
        let (on, stop) = (on.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = on.claims(t, &format!("w{w}-{n}-"), 1).await;
                n += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let key = on.env.engine.redis().keys(t).stock;
    on.on_cluster(move |c| {
        c.kill_master_of(&key)?;
        c.revive()
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in tasks {
        task.await?;
    }
    // Once the cluster is whole again, claims answer at once.
    let started = std::time::Instant::now();
    assert_eq!(on.claims(t, "after-", 10).await?, 10);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "claims after the failover took {:?}",
        started.elapsed()
    );
    on.audit_ok(t).await?;
    Ok(())
}
