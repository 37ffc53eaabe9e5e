//! `user_coupon`: the coupons as Postgres records them (claims are written by the arbiter),
//! read back for users, rebuilds and replays, and expired in batches.

// Dynamic SQL here only splices the constant column list below, never input.
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Row, postgres::PgRow};
use uuid::Uuid;

use super::corrupt;
use crate::{
    domain::{
        coupon::{Coupon, CouponStatus},
        ids::{RequestId, TemplateId, UserId},
    },
    error::{EngineError, EngineResult},
    store::records::RecentClaim,
};
use futures::{Stream, TryStreamExt};

const COUPON_COLUMNS: &str = "id, template_id, user_id, claim_request_id, status, order_id, locked_until, claimed_at, valid_from, \
     valid_until, used_at";

/// Reads a coupon row.
pub fn coupon_from_row(row: &PgRow) -> EngineResult<Coupon> {
    let status: String = row.try_get("status")?;
    Ok(Coupon {
        id: row.try_get("id")?,
        template_id: row.try_get("template_id")?,
        user_id: row.try_get("user_id")?,
        claim_request_id: row.try_get("claim_request_id")?,
        status: CouponStatus::parse(&status).ok_or_else(|| corrupt("coupon status"))?,
        order_id: row.try_get("order_id")?,
        locked_until: row.try_get("locked_until")?,
        claimed_at: row.try_get("claimed_at")?,
        valid_from: row.try_get("valid_from")?,
        valid_until: row.try_get("valid_until")?,
        used_at: row.try_get("used_at")?,
    })
}

/// Loads one coupon.
pub async fn get_coupon(pool: &PgPool, id: Uuid) -> EngineResult<Option<Coupon>> {
    let sql = format!("SELECT {COUPON_COLUMNS} FROM user_coupon WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(coupon_from_row).transpose()
}

/// A user's coupons, newest first (at most `limit`).
pub async fn user_coupons(
    pool: &PgPool,
    user_id: &UserId,
    limit: i64,
) -> EngineResult<Vec<Coupon>> {
    let sql = format!(
        "SELECT {COUPON_COLUMNS} FROM user_coupon WHERE user_id = $1 \
         ORDER BY claimed_at DESC, id LIMIT $2"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(user_id.as_str())
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.iter().map(coupon_from_row).collect()
}

/// All coupons of a template (tests, audits of small templates).
pub async fn template_coupons(pool: &PgPool, template: TemplateId) -> EngineResult<Vec<Coupon>> {
    let sql = format!(
        "SELECT {COUPON_COLUMNS} FROM user_coupon WHERE template_id = $1 ORDER BY claimed_at, id"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(template)
        .fetch_all(pool)
        .await?;
    rows.iter().map(coupon_from_row).collect()
}

/// Expires up to `batch` issued coupons past validity; returns how many.
pub async fn expire_batch(pool: &PgPool, batch: i64) -> EngineResult<u64> {
    Ok(sqlx::query(
        "WITH due AS (SELECT id FROM user_coupon WHERE status = 'issued' AND valid_until <= now() \
                      ORDER BY valid_until LIMIT $1 FOR UPDATE SKIP LOCKED) \
         UPDATE user_coupon c SET status = 'expired' FROM due \
         WHERE c.id = due.id AND c.status = 'issued'",
    )
    .bind(batch)
    .execute(pool)
    .await?
    .rows_affected())
}

/// The coupon id and owner stored for a claim request id, if any.
pub async fn claim_by_request(
    conn: &mut sqlx::PgConnection,
    template: TemplateId,
    request_id: &RequestId,
) -> EngineResult<Option<(Uuid, String)>> {
    Ok(sqlx::query_as(
        "SELECT id, user_id FROM user_coupon WHERE template_id = $1 AND claim_request_id = $2",
    )
    .bind(template)
    .bind(request_id.as_str())
    .fetch_optional(conn)
    .await?)
}

/// Coupons counting against stock, per user, in slices of at most `slice` users (a
/// rebuild streams them into Redis, so a million shoppers are never in memory or in one
/// Redis command at once).
pub fn counted_per_user_slices(
    conn: &mut PgConnection,
    template: TemplateId,
    slice: usize,
) -> impl Stream<Item = EngineResult<Vec<(String, i64)>>> + Send + '_ {
    sqlx::query_as::<_, (String, i64)>(
        "SELECT user_id, count(*) FROM user_coupon \
         WHERE template_id = $1 AND status <> 'revoked' GROUP BY user_id",
    )
    .bind(template)
    .fetch(conn)
    .try_chunks(slice)
    .map_err(|e| EngineError::from(e.1))
}

/// Coupons counting against stock, per user.
pub async fn counted_per_user(
    conn: &mut PgConnection,
    template: TemplateId,
) -> EngineResult<Vec<(String, i64)>> {
    counted_per_user_slices(conn, template, 10_000)
        .try_concat()
        .await
}

/// Claims of a template made within the last `window_ms` (for a rebuild to remember them),
/// in slices of at most `slice`.
pub fn recent_claims_slices(
    conn: &mut PgConnection,
    template: TemplateId,
    window_ms: i64,
    slice: usize,
) -> impl Stream<Item = EngineResult<Vec<RecentClaim>>> + Send + '_ {
    sqlx::query_as::<_, RecentClaim>(
        "SELECT claim_request_id, id, user_id, \
                ($2 - (extract(epoch FROM now() - claimed_at) * 1000))::bigint AS ttl_ms \
         FROM user_coupon WHERE template_id = $1 \
           AND claimed_at > now() - make_interval(secs => $2::double precision / 1000)",
    )
    .bind(template)
    .bind(window_ms)
    .fetch(conn)
    .try_chunks(slice)
    .map_err(|e| EngineError::from(e.1))
}

/// Claims of a template made within the last `window_ms`.
pub async fn recent_claims(
    conn: &mut PgConnection,
    template: TemplateId,
    window_ms: i64,
) -> EngineResult<Vec<RecentClaim>> {
    recent_claims_slices(conn, template, window_ms, 10_000)
        .try_concat()
        .await
}
