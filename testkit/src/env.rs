//! One isolated test environment: its own Postgres database (an emptied slot, see
//! `case_db.rs`) and Redis namespace on the shared backends, with an engine connected to
//! both. Dropping it frees the database and removes the namespace's keys.

use std::sync::Arc;

use sqlx::{Connection, Executor, PgConnection, postgres::PgConnectOptions};
use uuid::Uuid;

use crate::{
    Backends, ProvisionError,
    case_db::{CaseDatabase, TemplateRecord, with_database},
    shared_backends,
};
use coupon_engine::{
    CouponEngine, EngineConfig, MIGRATOR, RedisTarget,
    store::{
        postgres,
        redis::RedisStore,
        redis_conn::{RedisConn, delete_matching},
    },
};

/// An engine on a fresh database and namespace.
#[derive(Debug)]
pub struct TestEnv {
    /// The engine under test.
    pub engine: CouponEngine,
    /// URL of this environment's own database.
    pub database_url: String,
    /// Redis: one node or a cluster.
    pub redis: RedisTarget,
    /// This environment's Redis namespace.
    pub namespace: String,
    _database: CaseDatabase,
    _backends: Arc<Backends>,
}

impl TestEnv {
    /// A fresh environment on the shared backends with the default configuration.
    pub async fn new() -> Result<Self, ProvisionError> {
        Self::with_config(EngineConfig::default()).await
    }

    /// A fresh environment on the shared backends; `config.namespace` is replaced by a
    /// unique one.
    pub async fn with_config(config: EngineConfig) -> Result<Self, ProvisionError> {
        Self::on(shared_backends().await?, config).await
    }

    /// A fresh environment on the Redis at `redis_url` (a `redis-server` of the test's own,
    /// whose faults and settings touch nobody else) and the shared Postgres.
    pub async fn on_redis(redis_url: String, config: EngineConfig) -> Result<Self, ProvisionError> {
        let shared = shared_backends().await?;
        let backends = Backends::with_urls(redis_url, shared.database_url.clone(), None);
        Self::on(Arc::new(backends), config).await
    }

    /// A fresh environment on the given backends.
    pub async fn on(
        backends: Arc<Backends>,
        mut config: EngineConfig,
    ) -> Result<Self, ProvisionError> {
        let template_db = ensure_template_database(&backends.database_url).await?;
        let database = CaseDatabase::claim(&backends.database_url, &template_db).await?;
        let opts: PgConnectOptions = backends
            .database_url
            .parse()
            .map_err(ProvisionError::setup)?;
        let database_url = with_database(&backends.database_url, &database.name);
        config.namespace = format!("t{}", &Uuid::new_v4().simple().to_string()[..12]);
        let pool = postgres::pool_options(10)
            .connect_with(opts.database(&database.name))
            .await
            .map_err(ProvisionError::setup)?;
        let redis = RedisStore::connect_to(&backends.redis, &config.namespace)
            .await
            .map_err(ProvisionError::setup)?;
        let namespace = config.namespace.clone();
        Ok(Self {
            engine: CouponEngine::new(pool, redis, config),
            database_url,
            redis: backends.redis.clone(),
            namespace,
            _database: database,
            _backends: backends,
        })
    }

    /// Another engine on this environment's database and namespace (e.g. a second server).
    pub async fn another_engine(
        &self,
        mut config: EngineConfig,
    ) -> Result<CouponEngine, ProvisionError> {
        config.namespace = self.namespace.clone();
        engine_on(&self.database_url, &self.redis, config).await
    }
}

/// An engine on an existing environment's database and Redis (`config.namespace` names
/// it): a second server, or a server restarted after a kill. Its tasks and connections
/// belong to the runtime it is built on.
pub async fn engine_on(
    database_url: &str,
    redis: &RedisTarget,
    config: EngineConfig,
) -> Result<CouponEngine, ProvisionError> {
    let pool = postgres::pool_options(10)
        .connect(database_url)
        .await
        .map_err(ProvisionError::setup)?;
    let redis = RedisStore::connect_to(redis, &config.namespace)
        .await
        .map_err(ProvisionError::setup)?;
    Ok(CouponEngine::new(pool, redis, config))
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let redis = self.redis.clone();
        let pattern = format!("{}:*", self.namespace);
        // Drop cannot await: clean up on a thread with its own small runtime, and wait. The
        // database slot is freed when its holder connection closes, after this.
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = RedisConn::open(&redis).await {
                    let _ = delete_matching(&mut conn, &pattern).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// Name of the migrated template database for the current migrations.
fn template_name() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    // Templates built before their shape was recorded (`case_db::TemplateRecord`) are not reused.
    for b in b"record-v1" {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    for m in MIGRATOR.iter() {
        for b in m.checksum.iter().chain(m.version.to_le_bytes().iter()) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("coupon_tpl_{h:016x}")
}

/// Creates (once, under an advisory lock) a database with the migrations applied.
async fn ensure_template_database(admin_url: &str) -> Result<String, ProvisionError> {
    let name = template_name();
    let mut admin = PgConnection::connect(admin_url)
        .await
        .map_err(ProvisionError::setup)?;
    sqlx::query("SELECT pg_advisory_lock(7312001)")
        .execute(&mut admin)
        .await
        .map_err(ProvisionError::setup)?;
    let result = async {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                .bind(&name)
                .fetch_one(&mut admin)
                .await
                .map_err(ProvisionError::setup)?;
        if !exists {
            let building = format!("{name}_building");
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{building}\""
                )))
                .await
                .map_err(ProvisionError::setup)?;
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "CREATE DATABASE \"{building}\""
                )))
                .await
                .map_err(ProvisionError::setup)?;
            let mut conn = PgConnection::connect(&with_database(admin_url, &building))
                .await
                .map_err(ProvisionError::setup)?;
            MIGRATOR
                .run(&mut conn)
                .await
                .map_err(ProvisionError::setup)?;
            // What a slot must still look like to be emptied and reused (case_db.rs).
            let record = TemplateRecord::of(&mut conn).await?.to_comment();
            conn.close().await.map_err(ProvisionError::setup)?;
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "COMMENT ON DATABASE \"{building}\" IS '{}'",
                    record.replace('\'', "''")
                )))
                .await
                .map_err(ProvisionError::setup)?;
            // Renamed only once complete, so a crash mid-migration never leaves a bad template.
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "ALTER DATABASE \"{building}\" RENAME TO \"{name}\""
                )))
                .await
                .map_err(ProvisionError::setup)?;
        }
        Ok(name)
    }
    .await;
    let _ = sqlx::query("SELECT pg_advisory_unlock(7312001)")
        .execute(&mut admin)
        .await;
    let _ = admin.close().await;
    result
}
