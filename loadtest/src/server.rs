//! The in-process server: an isolated environment (own Postgres database, own Redis
//! namespace) from the engine's testkit, served on 127.0.0.1:0 with secrets chosen here.

use anyhow::Context;
use std::sync::Arc;

use coupon_engine::{
    EngineConfig, Persistence, Variant,
    http::{AppState, serve},
    testkit::{
        Backends, TestEnv,
        local::{LocalRedis, RedisPersistence},
        redis_cluster::LocalCluster,
        shared_backends,
    },
};

use crate::nemesis::OwnRedis;

/// Which Redis the in-process server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedisChoice {
    /// The provisioned one (`COUPON_REDIS_URL`, testcontainers or a local server).
    Shared,
    /// A `redis-server` of the run's own, with AOF, that a fault may restart.
    Own,
    /// A cluster of the run's own (3 masters + 3 replicas) that a fault may fail over.
    OwnCluster,
}
use tokio::{
    net::TcpListener,
    sync::{Mutex, oneshot},
    task::JoinHandle,
};
use uuid::Uuid;

/// A running in-process server and the environment under it.
pub(crate) struct InProcess {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The admin token it accepts.
    pub admin_token: String,
    /// Redis namespace and database, for the report.
    pub description: String,
    /// The run's own Redis, when a fault needs one it may restart or fail over.
    pub own_redis: Option<OwnRedis>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
    env: TestEnv,
}

impl InProcess {
    /// Provisions an environment for `variant` / `persistence` on `redis` and starts serving
    /// it. A Redis of the run's own is never a shared one, so a fault may kill it.
    pub(crate) async fn start(
        variant: Variant,
        persistence: Persistence,
        redis: RedisChoice,
    ) -> anyhow::Result<Self> {
        let config = EngineConfig {
            variant,
            persistence,
            ..EngineConfig::default()
        };
        let (target, own_redis) = match redis {
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
        let env = match target {
            Some(target) => {
                let shared = shared_backends().await.context("provisioning Postgres")?;
                let backends = Arc::new(Backends::with_target(
                    target,
                    shared.database_url.clone(),
                    None,
                ));
                TestEnv::on(backends, config)
                    .await
                    .context("provisioning the run's database")?
            }
            None => TestEnv::with_config(config)
                .await
                .context("provisioning Redis and Postgres (coupon_engine::testkit)")?,
        };
        let admin_token = format!("lt-admin-{}", Uuid::new_v4().simple());
        let user_secret = format!("lt-users-{}", Uuid::new_v4().simple());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding 127.0.0.1:0")?;
        let addr = listener.local_addr().context("local address")?;
        let state = AppState::new(env.engine.clone(), &admin_token, &user_secret);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, state, async move {
            let _ = rx.await;
        }));
        let description = format!(
            "in-process coupon-engine ({}, {} persistence) on {addr}; database {}, redis {}, namespace {}",
            variant.name(),
            match persistence {
                Persistence::Sync => "sync",
                Persistence::Async => "async",
            },
            env.database_url.rsplit('/').next().unwrap_or("?"),
            env.redis,
            env.namespace,
        );
        Ok(Self {
            base_url: format!("http://{addr}"),
            admin_token,
            description,
            own_redis,
            shutdown: Some(tx),
            task,
            env,
        })
    }

    /// The engine behind the server.
    pub(crate) fn engine(&self) -> &coupon_engine::CouponEngine {
        &self.env.engine
    }

    /// Drains and stops the server, then drops the environment (database and namespace).
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let served = (&mut self.task).await.context("server task")?;
        let env = self.env;
        // Dropping the environment removes its database and keys; it blocks briefly.
        tokio::task::spawn_blocking(move || drop(env))
            .await
            .context("cleaning up the environment")?;
        served.context("serving")
    }
}
