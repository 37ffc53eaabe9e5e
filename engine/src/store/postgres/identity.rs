//! `redis_identity` and `template_rebuild`: which pair of store identities a namespace's
//! Redis state was last rebuilt against, and every rebuild with the pair it was made for, so
//! a change of either store is noticed across engine restarts and rebuilt once however many
//! servers notice it (docs/ARCHITECTURE.md, "Store identities").

use sqlx::{PgConnection, PgPool};

use crate::{domain::ids::TemplateId, error::EngineResult};

/// The pair of identities a namespace's Redis state was built against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreIdentities {
    /// Redis's `run_id` (per master, joined, in a cluster).
    pub redis: String,
    /// Postgres's system identifier and timeline (`<sysid>:<timeline>`); None when recorded
    /// by an engine that did not know it yet.
    pub postgres: Option<String>,
}

/// This Postgres's identity: its system identifier (set by `initdb`, kept by a standby made
/// with `pg_basebackup`) and the timeline it writes on (a new one on every promotion or
/// point-in-time restore). Read from the primary only: `pg_current_wal_lsn` fails during
/// recovery, which is right, since a standby is no place to build Redis state against.
pub async fn postgres_identity(conn: &mut PgConnection) -> EngineResult<String> {
    Ok(sqlx::query_scalar(
        "SELECT s.system_identifier::text || ':' \
                || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) \
         FROM pg_control_system() s",
    )
    .fetch_one(conn)
    .await?)
}

/// The identities the namespace's templates were last rebuilt against, with the row
/// locked until the caller's transaction ends: a second server checking the same change
/// waits here, then finds it recorded.
pub async fn lock_store_identities(
    conn: &mut PgConnection,
    namespace: &str,
) -> EngineResult<Option<StoreIdentities>> {
    let row: Option<(String, Option<String>)> = sqlx::query_as(
        "SELECT run_id, postgres_identity FROM redis_identity WHERE namespace = $1 FOR UPDATE",
    )
    .bind(namespace)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(redis, postgres)| StoreIdentities { redis, postgres }))
}

/// Records the identities the namespace's templates now agree with.
pub async fn record_store_identities(
    conn: &mut PgConnection,
    namespace: &str,
    ids: &StoreIdentities,
) -> EngineResult<()> {
    sqlx::query(
        "INSERT INTO redis_identity (namespace, run_id, postgres_identity) VALUES ($1, $2, $3) \
         ON CONFLICT (namespace) DO UPDATE \
         SET run_id = EXCLUDED.run_id, postgres_identity = EXCLUDED.postgres_identity, \
             seen_at = now()",
    )
    .bind(namespace)
    .bind(&ids.redis)
    .bind(&ids.postgres)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records a rebuild of `template` under `epoch` (inside the rebuild's transaction: an
/// aborted rebuild leaves no row).
pub async fn record_rebuild(
    conn: &mut PgConnection,
    template: TemplateId,
    epoch: i64,
    trigger: &str,
    made_for: Option<&StoreIdentities>,
) -> EngineResult<()> {
    sqlx::query(
        "INSERT INTO template_rebuild (template_id, epoch, trigger, redis_identity, postgres_identity) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(template)
    .bind(epoch)
    .bind(trigger)
    .bind(made_for.map(|i| i.redis.as_str()))
    .bind(made_for.and_then(|i| i.postgres.as_deref()))
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether `template` was rebuilt for a change to exactly these stores.
pub async fn rebuilt_for(
    conn: &mut PgConnection,
    template: TemplateId,
    stores: &StoreIdentities,
) -> EngineResult<bool> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM template_rebuild WHERE template_id = $1 \
           AND trigger = 'identity' AND redis_identity = $2 \
           AND postgres_identity IS NOT DISTINCT FROM $3)",
    )
    .bind(template)
    .bind(&stores.redis)
    .bind(&stores.postgres)
    .fetch_one(conn)
    .await?)
}

/// Rebuilds of `template` made for a change of store identity, per pair of identities,
/// where there was more than one (one change rebuilt more than once): (identities, count).
pub async fn repeated_identity_rebuilds(
    pool: &PgPool,
    template: TemplateId,
) -> EngineResult<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT coalesce(redis_identity, '?') || ' / ' || coalesce(postgres_identity, '?'), \
                count(*) \
         FROM template_rebuild WHERE template_id = $1 AND trigger = 'identity' \
         GROUP BY 1 HAVING count(*) > 1 ORDER BY 1",
    )
    .bind(template)
    .fetch_all(pool)
    .await?)
}
