//! The servers a run starts itself: an isolated environment (own Postgres database, own
//! Redis namespace) from `coupon_testkit`, served either in-process on 127.0.0.1:0 or by
//! `coupon-server` processes (`--servers N`, see `fleet.rs`), with secrets chosen here.

use anyhow::Context;
use std::{path::PathBuf, sync::Arc};

use coupon_engine::{EngineConfig, Persistence, Variant, http::AppState};
use coupon_testkit::{
    Backends, SpawnedServer, TestEnv,
    fault_proxy::FaultProxy,
    local::{LocalPostgres, LocalRedis, RedisPersistence},
    pg_failover::{ReplicatedPostgres, Replication},
    redis_cluster::LocalCluster,
    shared_backends, spawn_server,
};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::{
    fleet::{Fleet, FleetSpec},
    own_stores::{GreyPlan, GreyStores, OwnRedis, RedisChoice},
};

/// What serves the run.
enum Serving {
    /// The engine's HTTP API in this process, with its sweep (as `coupon-server` runs it).
    InProcess(SpawnedServer, Sweeper),
    /// `coupon-server` processes (shared with a nemesis that kills and restarts one).
    Processes(Arc<Mutex<Fleet>>),
}

/// The run's own server(s) and the environment under them.
pub(crate) struct Served {
    /// `http://127.0.0.1:<port>` of each server.
    pub base_urls: Vec<String>,
    /// The admin token they accept.
    pub admin_token: String,
    /// The order service's token: only it may redeem on these servers.
    pub service_token: String,
    /// Redis namespace and database, for the report.
    pub description: String,
    /// The run's own Redis, when a fault needs one it may restart or fail over.
    pub own_redis: Option<OwnRedis>,
    /// The run's own Postgres and the fault proxies, when a grey fault needs them.
    pub grey: GreyStores,
    serving: Serving,
    env: TestEnv,
}

/// How the run's servers are started.
pub(crate) struct Plan {
    /// Engine variant.
    pub variant: Variant,
    /// Claim persistence.
    pub persistence: Persistence,
    /// The Redis the servers run on (of the run's own when a fault may act on it).
    pub redis: RedisChoice,
    /// `Some((n, binary))`: n `coupon-server` processes; None: in-process.
    pub processes: Option<(usize, Option<PathBuf>)>,
    /// What a grey-failure nemesis needs.
    pub grey: GreyPlan,
}

fn persistence_name(p: Persistence) -> &'static str {
    match p {
        Persistence::Sync => "sync",
        Persistence::Async => "async",
    }
}

impl Served {
    /// Provisions an environment on `plan.redis` and starts serving it. A Redis of the run's
    /// own is never a shared one, so a fault may kill it.
    pub(crate) async fn start(plan: Plan) -> anyhow::Result<Self> {
        let config = EngineConfig {
            variant: plan.variant,
            persistence: plan.persistence,
            ..EngineConfig::default()
        };
        let (env, own_redis, mut grey) = provision(plan.redis, &plan.grey, config).await?;
        // The first server's own link is made to the run's database (its name is known
        // only now); the others reach it directly.
        let mut database_url_of = Vec::new();
        if plan.grey.partition_first {
            let (link, url) = FaultProxy::for_url(&env.database_url)
                .context("starting the fault proxy in front of the first server's Postgres")?;
            grey.first_server_pg_link = Some(Arc::new(link));
            database_url_of.push((0, url));
        }
        let admin_token = format!("lt-admin-{}", Uuid::new_v4().simple());
        let user_secret = format!("lt-users-{}", Uuid::new_v4().simple());
        // The run's own servers are configured as production should be: redeem belongs to
        // the order service, so the scenarios redeem through its token.
        let service_token = format!("lt-service-{}", Uuid::new_v4().simple());
        let stores = format!(
            "database {}, redis {}, namespace {}",
            env.database_url.rsplit('/').next().unwrap_or("?"),
            env.redis,
            env.namespace,
        );
        let engine = format!(
            "{}, {} persistence",
            plan.variant.name(),
            persistence_name(plan.persistence)
        );
        let (serving, base_urls, description) = match plan.processes {
            None => {
                let state = AppState::new(env.engine.clone(), &admin_token, &user_secret)
                    .with_service_token(&service_token);
                let server = spawn_server(state)
                    .await
                    .context("serving on 127.0.0.1:0")?;
                let (addr, urls) = (server.addr(), vec![server.base_url()]);
                (
                    Serving::InProcess(server, Sweeper::start(env.engine.clone())),
                    urls,
                    format!("in-process coupon-engine ({engine}) on {addr}; {stores}"),
                )
            }
            Some((count, binary)) => {
                let fleet = Fleet::start(FleetSpec {
                    count,
                    binary,
                    variant: plan.variant,
                    persistence: persistence_name(plan.persistence),
                    redis: env.redis.clone(),
                    database_url: env.database_url.clone(),
                    namespace: env.namespace.clone(),
                    admin_token: admin_token.clone(),
                    user_secret,
                    service_token: service_token.clone(),
                    skews: plan.grey.skews.clone(),
                    database_url_of,
                })
                .await?;
                let urls = fleet.base_urls();
                let description = format!(
                    "{count} {} process(es) ({engine}) on {}; {stores}",
                    fleet.binary_name(),
                    urls.join(", ")
                );
                (
                    Serving::Processes(Arc::new(Mutex::new(fleet))),
                    urls,
                    description,
                )
            }
        };
        Ok(Self {
            base_urls,
            admin_token,
            service_token,
            description,
            own_redis,
            grey,
            serving,
            env,
        })
    }

    /// The `coupon-server` processes, if the run started some.
    pub(crate) fn fleet(&self) -> Option<Arc<Mutex<Fleet>>> {
        match &self.serving {
            Serving::Processes(fleet) => Some(fleet.clone()),
            Serving::InProcess(..) => None,
        }
    }

    /// Each started server process's peak resident memory so far, MiB (empty in process).
    pub(crate) async fn servers_peak_rss_mib(&self) -> Vec<Option<f64>> {
        match &self.serving {
            Serving::Processes(fleet) => fleet.lock().await.peak_rss_mib(),
            Serving::InProcess(..) => Vec::new(),
        }
    }

    /// An engine on the servers' database and namespace (the in-process server's own).
    pub(crate) fn engine(&self) -> &coupon_engine::CouponEngine {
        &self.env.engine
    }

    /// Drains and stops the server(s), then drops the environment (database and namespace).
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let served = match self.serving {
            Serving::InProcess(server, _sweeper) => server.stop().await.context("serving"),
            Serving::Processes(fleet) => match Arc::try_unwrap(fleet) {
                Ok(fleet) => fleet.into_inner().stop().await,
                Err(_) => anyhow::bail!("the servers are still in a nemesis's hands"),
            },
        };
        let env = self.env;
        // Dropping the environment removes its database and keys; it blocks briefly.
        tokio::task::spawn_blocking(move || drop(env))
            .await
            .context("cleaning up the environment")?;
        served
    }
}

/// An environment on `choice`: a Redis of the run's own (returned, for the faults) with the
/// shared Postgres, or the shared backends; with a Postgres of the run's own and fault
/// proxies in front of the stores when `grey` asks for them.
async fn provision(
    choice: RedisChoice,
    grey: &GreyPlan,
    config: EngineConfig,
) -> anyhow::Result<(TestEnv, Option<OwnRedis>, GreyStores)> {
    let (target, own_redis) = match choice {
        RedisChoice::Shared => (None, None),
        RedisChoice::Own => {
            let r = LocalRedis::start_with(RedisPersistence::Aof)
                .context("starting the run's own redis-server")?;
            let target = coupon_engine::RedisTarget::Node(r.url());
            (Some(target), Some(OwnRedis::Node(Arc::new(Mutex::new(r)))))
        }
        RedisChoice::OwnCluster => {
            let c = tokio::task::spawn_blocking(|| LocalCluster::start(RedisPersistence::Aof))
                .await
                .context("starting the run's own Redis Cluster")?
                .context("starting the run's own Redis Cluster (3 masters + 3 replicas)")?;
            let target = c.target();
            (
                Some(target),
                Some(OwnRedis::Cluster(Arc::new(Mutex::new(c)))),
            )
        }
    };
    let mut stores = GreyStores::default();
    let own_postgres = grey.own_postgres || grey.replicated_postgres.is_some();
    let env = match target {
        None if !own_postgres => TestEnv::with_config(config)
            .await
            .context("provisioning Redis and Postgres (coupon_testkit)")?,
        target => {
            let shared = match &target {
                Some(_) if own_postgres => None,
                _ => Some(
                    shared_backends()
                        .await
                        .context("provisioning Redis and Postgres")?,
                ),
            };
            let mut target = match (target, &shared) {
                (Some(t), _) => t,
                (None, Some(shared)) => shared.redis.clone(),
                (None, None) => anyhow::bail!("no Redis to run on"),
            };
            let mut database_url = match &shared {
                Some(shared) if !own_postgres => shared.database_url.clone(),
                _ if grey.replicated_postgres.is_some() => {
                    let mode = grey.replicated_postgres.unwrap_or(Replication::Synchronous);
                    let pair = tokio::task::spawn_blocking(move || ReplicatedPostgres::start(mode))
                        .await
                        .context("starting the run's own Postgres primary and standby")?
                        .context(
                            "starting the run's own Postgres primary and streaming standby \
                             (initdb, pg_basebackup and pg_ctl, as the postgres user)",
                        )?;
                    let url = pair.url();
                    stores.replicated_postgres = Some(Arc::new(pair));
                    url
                }
                _ => {
                    let pg = tokio::task::spawn_blocking(LocalPostgres::start)
                        .await
                        .context("starting the run's own Postgres")?
                        .context(
                            "starting the run's own Postgres (initdb and pg_ctl, as the postgres user)",
                        )?;
                    let url = pg.url();
                    stores.postgres = Some(Arc::new(pg));
                    url
                }
            };
            if grey.pg_proxy {
                let (link, url) = FaultProxy::for_url(&database_url)
                    .context("starting the fault proxy in front of Postgres")?;
                database_url = url;
                stores.pg_link = Some(Arc::new(link));
            }
            if grey.redis_proxy {
                let coupon_engine::RedisTarget::Node(url) = &target else {
                    anyhow::bail!("a fault proxy in front of a Redis Cluster is not supported");
                };
                let (link, url) = FaultProxy::for_url(url)
                    .context("starting the fault proxy in front of Redis")?;
                target = coupon_engine::RedisTarget::Node(url);
                stores.redis_link = Some(Arc::new(link));
            }
            let backends = Arc::new(Backends::with_target(target, database_url, None));
            TestEnv::on(backends, config)
                .await
                .context("provisioning the run's database")?
        }
    };
    Ok((env, own_redis, stores))
}

/// The in-process server's periodic sweep (lapsed checkout locks, expired coupons), every
/// `lock_sweep_every` as `coupon-server`'s reconcile loop does it, so the auditor's I12
/// bound is the one a deployment has. Stopped with the server.
struct Sweeper(tokio::task::JoinHandle<()>);

impl Sweeper {
    fn start(engine: coupon_engine::CouponEngine) -> Self {
        let every = engine.config().lock_sweep_every;
        Self(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if let Err(e) = engine.expire_sweep().await {
                    tracing::warn!(error = %e, "sweep failed");
                }
            }
        }))
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}
