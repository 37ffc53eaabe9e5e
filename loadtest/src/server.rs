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
        shared_backends,
    },
};
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
    /// The run's own Redis, when a fault needs one it may restart.
    pub own_redis: Option<Arc<Mutex<LocalRedis>>>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
    env: TestEnv,
}

impl InProcess {
    /// Provisions an environment for `variant` / `persistence` and starts serving it; with
    /// `own_redis`, on a `redis-server` started for this run alone (with AOF), never a
    /// shared one, so a fault may kill and restart it.
    pub(crate) async fn start(
        variant: Variant,
        persistence: Persistence,
        own_redis: bool,
    ) -> anyhow::Result<Self> {
        let config = EngineConfig {
            variant,
            persistence,
            ..EngineConfig::default()
        };
        let (env, own_redis) = if own_redis {
            let redis = LocalRedis::start_with(RedisPersistence::Aof)
                .context("starting the run's own redis-server")?;
            let shared = shared_backends().await.context("provisioning Postgres")?;
            let backends = Arc::new(Backends::with_urls(
                redis.url(),
                shared.database_url.clone(),
                None,
            ));
            let env = TestEnv::on(backends, config)
                .await
                .context("provisioning the run's database")?;
            (env, Some(Arc::new(Mutex::new(redis))))
        } else {
            let env = TestEnv::with_config(config)
                .await
                .context("provisioning Redis and Postgres (coupon_engine::testkit)")?;
            (env, None)
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
            "in-process coupon-engine ({}, {} persistence) on {addr}; database {}, redis namespace {}",
            variant.name(),
            match persistence {
                Persistence::Sync => "sync",
                Persistence::Async => "async",
            },
            env.database_url.rsplit('/').next().unwrap_or("?"),
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
