//! `redis_identity`: which Redis a namespace's templates were last rebuilt against, so a
//! restart or failover of Redis is noticed across engine restarts.

use sqlx::PgPool;

use crate::error::EngineResult;

/// The Redis `run_id` the namespace's templates were last rebuilt against.
pub async fn redis_identity(pool: &PgPool, namespace: &str) -> EngineResult<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT run_id FROM redis_identity WHERE namespace = $1")
            .bind(namespace)
            .fetch_optional(pool)
            .await?,
    )
}

/// Records the Redis `run_id` the namespace's templates now agree with.
pub async fn record_redis_identity(
    pool: &PgPool,
    namespace: &str,
    run_id: &str,
) -> EngineResult<()> {
    sqlx::query(
        "INSERT INTO redis_identity (namespace, run_id) VALUES ($1, $2) \
         ON CONFLICT (namespace) DO UPDATE SET run_id = EXCLUDED.run_id, seen_at = now()",
    )
    .bind(namespace)
    .bind(run_id)
    .execute(pool)
    .await?;
    Ok(())
}
