//! The defect mutants' own statements (feature `mutants`): the engine's redeem and refund
//! UPDATEs with a guard left out, which is each mutant's defect. Here, beside the statements
//! they mutate, so a schema change meets them too; everything else the mutants write goes
//! through the engine's own functions.

use sqlx::postgres::PgExecutor;
use uuid::Uuid;

use crate::{
    domain::ids::{TemplateId, UserId},
    error::EngineResult,
};

/// Which coupons a mutant's redeem UPDATE marks used. Neither checks the validity start nor
/// the minimum order, as the engine's does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsableIf {
    /// D2: whatever its status but revoked (no `status = 'issued'`), so a used coupon is
    /// "redeemed" again.
    NotRevoked,
    /// D3: issued.
    Issued,
}

/// Marks a coupon of `user_id` still valid used by `order_id`, if `usable`; returns the rows
/// marked.
pub async fn mark_used_if(
    conn: impl PgExecutor<'_>,
    usable: UsableIf,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> EngineResult<u64> {
    let sql = match usable {
        UsableIf::NotRevoked => {
            "UPDATE user_coupon SET status = 'used', order_id = $3, used_at = now() \
             WHERE id = $1 AND user_id = $2 AND status <> 'revoked' AND now() < valid_until"
        }
        UsableIf::Issued => {
            "UPDATE user_coupon SET status = 'used', order_id = $3, used_at = now() \
             WHERE id = $1 AND user_id = $2 AND status = 'issued' AND now() < valid_until"
        }
    };
    Ok(sqlx::query(sql)
        .bind(coupon)
        .bind(user_id.as_str())
        .bind(order_id)
        .execute(conn)
        .await?
        .rows_affected())
}

/// D4: gives a used coupon back to its user whatever the template's policy (the engine
/// revokes it under `return_to_stock`). Returns its template, None when nothing matched.
pub async fn restore_to_user(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> EngineResult<Option<TemplateId>> {
    Ok(sqlx::query_scalar(
        "UPDATE user_coupon SET status = 'issued', order_id = NULL, used_at = NULL \
         WHERE id = $1 AND status = 'used' AND user_id = $2 AND order_id = $3 RETURNING template_id",
    )
    .bind(coupon)
    .bind(user_id.as_str())
    .bind(order_id)
    .fetch_optional(conn)
    .await?)
}

/// mall #1003: locks a coupon for `order_id` whatever its status (the check was a read
/// before); returns the lock's end.
pub async fn lock_unguarded(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    order_id: &str,
    ttl_ms: i64,
) -> EngineResult<time::OffsetDateTime> {
    Ok(sqlx::query_scalar(
        "UPDATE user_coupon SET status = 'locked', order_id = $2, used_at = NULL, \
                locked_until = now() + make_interval(secs => $3::double precision / 1000) \
         WHERE id = $1 RETURNING locked_until",
    )
    .bind(coupon)
    .bind(order_id)
    .bind(ttl_ms)
    .fetch_one(conn)
    .await?)
}

/// litemall #581: the coupons of `template` counting against stock, in all and of `user_id`
/// — read, to be compared and then inserted in separate steps.
pub async fn counted_in_postgres(
    conn: impl PgExecutor<'_>,
    template: TemplateId,
    user_id: &UserId,
) -> EngineResult<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE user_id = $2) FROM user_coupon \
         WHERE template_id = $1 AND status <> 'revoked'",
    )
    .bind(template)
    .bind(user_id.as_str())
    .fetch_one(conn)
    .await?)
}
