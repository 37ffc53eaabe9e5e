//! `stock_outbox`: refunds to stock committed in Postgres and waiting to reach Redis, applied
//! exactly once by the relay or settled by a rebuild that counted them.

use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

use crate::{
    domain::ids::{TemplateId, UserId},
    error::EngineResult,
};

/// Marks every unapplied outbox row of a template applied (a rebuild counted them).
pub async fn settle_outbox(conn: &mut PgConnection, template: TemplateId) -> EngineResult<u64> {
    Ok(sqlx::query(
        "UPDATE stock_outbox SET applied_at = now() WHERE template_id = $1 AND applied_at IS NULL",
    )
    .bind(template)
    .execute(conn)
    .await?
    .rows_affected())
}

/// An outbox row waiting to be applied to Redis.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    /// Row id (the exactly-once key in Redis).
    pub id: i64,
    /// The refunded coupon.
    pub coupon_id: Uuid,
    /// Its owner, whose quota is returned.
    pub user_id: UserId,
}

/// Locks up to `limit` unapplied outbox rows of a template (skipping rows another relay holds).
pub async fn lock_outbox(
    tx: &mut Transaction<'_, Postgres>,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<OutboxRow>> {
    let rows: Vec<(i64, Uuid, String)> = sqlx::query_as(
        "SELECT id, coupon_id, user_id FROM stock_outbox \
         WHERE template_id = $1 AND applied_at IS NULL ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, coupon_id, user_id)| OutboxRow {
            id,
            coupon_id,
            user_id: UserId::trusted(user_id),
        })
        .collect())
}

/// Marks outbox rows applied.
pub async fn mark_outbox_applied(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
) -> EngineResult<()> {
    if !ids.is_empty() {
        sqlx::query("UPDATE stock_outbox SET applied_at = now() WHERE id = ANY($1)")
            .bind(ids)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Records, inside a refund's transaction, that `coupon`'s stock and its owner's quota must
/// go back to Redis.
pub async fn insert_return_stock(
    conn: &mut PgConnection,
    template: TemplateId,
    coupon: Uuid,
    user_id: &UserId,
) -> EngineResult<()> {
    sqlx::query(
        "INSERT INTO stock_outbox (template_id, coupon_id, user_id, kind) \
         VALUES ($1, $2, $3, 'return_stock')",
    )
    .bind(template)
    .bind(coupon)
    .bind(user_id.as_str())
    .execute(conn)
    .await?;
    Ok(())
}
