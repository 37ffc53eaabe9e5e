//! # coupon-testkit
//!
//! Provisioning of Redis and Postgres for the engine's integration tests, the load test and
//! the property tests (docs/ARCHITECTURE.md, "Provisioning"). A crate of its own, not a
//! module of the engine: the engine's library never carries test-only dependencies
//! (testcontainers, tempfile); its integration tests (`engine/tests/integration`) depend on it.
//!
//! Backends are provisioned in this order:
//!
//! 1. `COUPON_REDIS_URL` and `COUPON_DATABASE_URL`: existing services;
//! 2. testcontainers (images from `images.env`) when a Docker daemon answers;
//! 3. local `redis-server` and `initdb`/`pg_ctl` on free loopback ports;
//! 4. otherwise one error naming the three ways.
//!
//! `COUPON_REDIS_CLUSTER=local` replaces the Redis of ways 1–3 with a Redis Cluster of the
//! process's own (3 masters + 3 replicas, [`redis_cluster::LocalCluster`]).
//!
//! Every [`TestEnv`] gets its own Postgres database (copied from a migrated template
//! database, so it is fast) and its own Redis namespace, so tests run in parallel on
//! shared servers and clean up after themselves.
//!
//! [`spawn_server`] serves an engine's HTTP API in-process on a free loopback port, for the
//! HTTP integration tests and the load test alike.

mod case_db;
mod containers;
mod env;
pub mod fault_proxy;
mod host;
pub mod images;
pub mod local;
pub mod pg_failover;
pub mod process;
pub mod redis_cluster;
pub mod redis_server;
mod server;

pub use env::{TestEnv, engine_on};
pub use server::{SpawnedServer, spawn_server};

use std::sync::Arc;

use tokio::sync::OnceCell;

use coupon_engine::RedisTarget;

/// Why no backends could be provisioned.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// None of the three ways worked.
    #[error(
        "no Redis/Postgres available. Either (1) set COUPON_REDIS_URL and COUPON_DATABASE_URL \
         to running services, (2) run a Docker daemon for testcontainers, or (3) install \
         redis-server and PostgreSQL (initdb, pg_ctl) locally. Tried: {0}"
    )]
    Nothing(String),
    /// The container way failed.
    #[error("testcontainers: {0}")]
    Containers(String),
    /// The local-binaries way failed.
    #[error("local binaries: {0}")]
    Local(String),
    /// Services were found but could not be prepared (database, migrations).
    #[error("preparing backends: {0}")]
    Setup(String),
}

impl ProvisionError {
    /// A failure of the local-binaries way, from any error.
    pub(crate) fn local(e: impl std::fmt::Display) -> Self {
        Self::Local(e.to_string())
    }

    /// A failure to prepare backends that were found, from any error.
    pub(crate) fn setup(e: impl std::fmt::Display) -> Self {
        Self::Setup(e.to_string())
    }
}

/// How the backends were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// URLs from the environment.
    Env,
    /// testcontainers.
    Containers,
    /// Local binaries.
    Local,
}

/// Whether a Postgres this crate starts flushes its commits to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// `fsync=off`: a test fixture, fast, and as safe as the OS page cache (a crash of
    /// Postgres alone loses nothing; a crash of the machine would).
    Fixture,
    /// `fsync=on`, as Postgres ships: every commit waits for its WAL flush.
    Flushed,
}

/// A Redis and a Postgres server (the admin URL of the latter), kept alive by guards.
pub struct Backends {
    /// Redis: one node or a cluster.
    pub redis: RedisTarget,
    /// URL of a Postgres database with rights to create databases.
    pub database_url: String,
    /// Which way provided them.
    pub way: Way,
    _guards: Vec<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("redis", &self.redis)
            .field("database_url", &self.database_url)
            .field("way", &self.way)
            .finish_non_exhaustive()
    }
}

impl Backends {
    /// Provisions backends the first way that works (see the module docs), on a cluster of
    /// this process's own when `COUPON_REDIS_CLUSTER=local`.
    pub async fn provision() -> Result<Self, ProvisionError> {
        Self::provision_ways(Durability::Fixture)
            .await?
            .with_cluster_option()
            .await
    }

    /// Provisions backends like [`Self::provision`], but a Postgres started here flushes its
    /// commits (`fsync=on`). The test fixtures run Postgres with `fsync=off`, which is right
    /// for tests and wrong for a measurement of a durable commit: `coupon-loadtest bench`
    /// compares group-committed claims with single-row commits, and without the flush the
    /// comparison loses what it is about. Services named by the environment are taken as
    /// they are configured.
    pub async fn provision_durable() -> Result<Self, ProvisionError> {
        Self::provision_ways(Durability::Flushed)
            .await?
            .with_cluster_option()
            .await
    }

    /// These backends, on a Redis Cluster of their own when `COUPON_REDIS_CLUSTER=local`.
    async fn with_cluster_option(self) -> Result<Self, ProvisionError> {
        match std::env::var("COUPON_REDIS_CLUSTER").as_deref() {
            Ok("local") => self.on_local_cluster().await,
            Ok("") | Err(_) => Ok(self),
            Ok(other) => Err(ProvisionError::Setup(format!(
                "COUPON_REDIS_CLUSTER={other:?}: the only value is \"local\""
            ))),
        }
    }

    /// These backends with their Redis replaced by a new [`redis_cluster::LocalCluster`]
    /// (no persistence), kept alive as long as they are.
    pub async fn on_local_cluster(mut self) -> Result<Self, ProvisionError> {
        let cluster = tokio::task::spawn_blocking(|| {
            redis_cluster::LocalCluster::start(redis_server::RedisPersistence::None)
        })
        .await
        .map_err(|e| ProvisionError::Local(e.to_string()))??;
        self.redis = cluster.target();
        self._guards.push(Box::new(cluster));
        Ok(self)
    }

    /// The Redis URL of a single-node target, or the first seed of a cluster (for tools
    /// that speak to one server).
    pub fn redis_url(&self) -> &str {
        self.redis.first_url()
    }

    async fn provision_ways(durability: Durability) -> Result<Self, ProvisionError> {
        let mut tried = Vec::new();
        match Self::from_env() {
            Some(b) => return Ok(b),
            None => tried.push("env: COUPON_REDIS_URL/COUPON_DATABASE_URL not set".to_owned()),
        }
        match containers::start(durability).await {
            Ok(b) => return Ok(b),
            Err(e) => tried.push(e.to_string()),
        }
        match Self::local_with(durability) {
            Ok(b) => return Ok(b),
            Err(e) => tried.push(e.to_string()),
        }
        Err(ProvisionError::Nothing(tried.join("; ")))
    }

    /// Way 1: existing services named by the environment.
    pub fn from_env() -> Option<Self> {
        let redis_url = std::env::var("COUPON_REDIS_URL").ok()?;
        let database_url = std::env::var("COUPON_DATABASE_URL").ok()?;
        Some(Self {
            redis: RedisTarget::Node(redis_url),
            database_url,
            way: Way::Env,
            _guards: Vec::new(),
        })
    }

    /// Way 2: testcontainers, ignoring the environment's URLs.
    pub async fn containers() -> Result<Self, ProvisionError> {
        containers::start(Durability::Fixture).await
    }

    /// Way 3: local binaries, ignoring the environment's URLs.
    pub fn local() -> Result<Self, ProvisionError> {
        Self::local_with(Durability::Fixture)
    }

    fn local_with(durability: Durability) -> Result<Self, ProvisionError> {
        let redis = local::LocalRedis::start()?;
        let pg = match durability {
            Durability::Fixture => local::LocalPostgres::start()?,
            Durability::Flushed => local::LocalPostgres::start_durable()?,
        };
        Ok(Self {
            redis: RedisTarget::Node(redis.url()),
            database_url: pg.url(),
            way: Way::Local,
            _guards: vec![Box::new(redis), Box::new(pg)],
        })
    }

    /// Backends on the given URLs, with `guard` kept alive as long as they are (e.g. a
    /// [`local::LocalRedis`] a fault test owns, beside the shared Postgres).
    pub fn with_urls(
        redis_url: String,
        database_url: String,
        guard: Option<Box<dyn Send + Sync>>,
    ) -> Self {
        Self::with_target(RedisTarget::Node(redis_url), database_url, guard)
    }

    /// Backends on the given Redis (e.g. a case's own [`redis_cluster::LocalCluster`]) and
    /// Postgres, with `guard` kept alive as long as they are.
    pub fn with_target(
        redis: RedisTarget,
        database_url: String,
        guard: Option<Box<dyn Send + Sync>>,
    ) -> Self {
        Self::assembled(redis, database_url, Way::Env, guard.into_iter().collect())
    }

    /// Assembles backends from parts (used by the container way).
    pub(crate) fn assembled(
        redis: RedisTarget,
        database_url: String,
        way: Way,
        guards: Vec<Box<dyn Send + Sync>>,
    ) -> Self {
        Self {
            redis,
            database_url,
            way,
            _guards: guards,
        }
    }
}

static SHARED: OnceCell<Arc<Backends>> = OnceCell::const_new();

/// Backends shared by every test of this process, provisioned on first use.
///
/// Servers started for it (ways 2 and 3) live until the process exits; a local server is
/// stopped by a watchdog when the process is gone.
pub async fn shared_backends() -> Result<Arc<Backends>, ProvisionError> {
    SHARED
        .get_or_try_init(|| async { Backends::provision().await.map(Arc::new) })
        .await
        .cloned()
}
