//! The auditor's reads (I1–I5, docs/ARCHITECTURE.md, "Invariants"): each one states in SQL
//! what a sound template never holds, so the rows returned are the violations themselves.
//! They read several tables at once, which is why they are a family of their own.

use sqlx::PgPool;
use uuid::Uuid;

use crate::{domain::ids::TemplateId, error::EngineResult};

/// Coupons counting against stock, per user (unordered).
pub async fn audit_counted_per_user(
    pg: &PgPool,
    template: TemplateId,
) -> EngineResult<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT user_id, count(*) FROM user_coupon \
         WHERE template_id = $1 AND status <> 'revoked' GROUP BY user_id",
    )
    .bind(template)
    .fetch_all(pg)
    .await?)
}

/// Refunds to stock not yet applied to Redis, per user.
pub async fn audit_unapplied_per_user(
    pg: &PgPool,
    template: TemplateId,
) -> EngineResult<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT user_id, count(*) FROM stock_outbox \
         WHERE template_id = $1 AND applied_at IS NULL GROUP BY user_id",
    )
    .bind(template)
    .fetch_all(pg)
    .await?)
}

/// Which of `ids` Postgres holds as coupons.
pub async fn persisted_coupon_ids(pg: &PgPool, ids: &[Uuid]) -> EngineResult<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM user_coupon WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(pg)
            .await?,
    )
}

/// The template's stock counter and the count of its rows it stands for, in one snapshot
/// (one statement, however busy the template is).
pub async fn audit_counter_and_rows(
    pg: &PgPool,
    template: TemplateId,
) -> EngineResult<(Option<i64>, i64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT counted FROM template_stock WHERE template_id = $1), \
                (SELECT count(*) FROM user_coupon WHERE template_id = $1 AND status <> 'revoked')",
    )
    .bind(template)
    .fetch_one(pg)
    .await?)
}

/// What Postgres says Redis's stock must answer for, in one snapshot: the stock counter,
/// the refunds to stock not yet applied to Redis, and which of `in_flight` (the coupon ids
/// of Redis's pending intents) are already stored. Index reads only: its cost follows what
/// is in flight, not the coupons the template has issued.
pub async fn stock_ledger(
    pg: &PgPool,
    template: TemplateId,
    in_flight: &[Uuid],
) -> EngineResult<(Option<i64>, i64, Vec<Uuid>)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT counted FROM template_stock WHERE template_id = $1), \
                (SELECT count(*) FROM stock_outbox \
                  WHERE template_id = $1 AND applied_at IS NULL), \
                ARRAY(SELECT id FROM user_coupon WHERE id = ANY($2))",
    )
    .bind(template)
    .bind(in_flight)
    .fetch_one(pg)
    .await?)
}

/// I4: a coupon whose status disagrees with its live use-log rows.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UseLogMismatch {
    /// The coupon.
    pub id: Uuid,
    /// Its status, as stored.
    pub status: String,
    /// The order it records.
    pub order_id: Option<String>,
    /// Its live use-log rows.
    pub live: i64,
    /// Their orders, comma-separated.
    pub live_orders: Option<String>,
}

/// I4 violations, at most `limit`.
pub async fn audit_use_log_mismatches(
    pg: &PgPool,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<UseLogMismatch>> {
    Ok(sqlx::query_as(
        "SELECT c.id, c.status, c.order_id, count(l.id) AS live, \
                string_agg(l.order_id, ',') AS live_orders \
         FROM user_coupon c LEFT JOIN coupon_use_log l ON l.coupon_id = c.id AND NOT l.undone \
         WHERE c.template_id = $1 GROUP BY c.id \
         HAVING (c.status = 'used' AND (count(l.id) <> 1 \
                    OR max(l.order_id) IS DISTINCT FROM c.order_id)) \
             OR (c.status <> 'used' AND count(l.id) > 0) \
         LIMIT $2",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}

/// I5: a coupon in a status no legal path leads to.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct IllegalStatus {
    /// The coupon.
    pub id: Uuid,
    /// Its status, as stored.
    pub status: String,
    /// Its template's refund policy, as stored.
    pub refund_policy: String,
    /// True if a use of it was undone.
    pub refunded: bool,
}

/// I5 violations of status, at most `limit`.
pub async fn audit_illegal_statuses(
    pg: &PgPool,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<IllegalStatus>> {
    Ok(sqlx::query_as(
        "SELECT c.id, c.status, t.refund_policy, \
                EXISTS (SELECT 1 FROM coupon_use_log l WHERE l.coupon_id = c.id AND l.undone) AS refunded, \
                c.valid_until > now() AS still_valid \
         FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id \
         WHERE c.template_id = $1 AND ( \
             (c.status = 'revoked' AND (t.refund_policy <> 'return_to_stock' OR NOT EXISTS \
                 (SELECT 1 FROM coupon_use_log l WHERE l.coupon_id = c.id AND l.undone))) \
          OR (c.status = 'expired' AND c.valid_until > now())) \
         LIMIT $2",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}

/// I5: coupons whose stock went back although they are not revoked, with their status.
pub async fn audit_stray_returns(
    pg: &PgPool,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<(Uuid, String)>> {
    Ok(sqlx::query_as(
        "SELECT o.coupon_id, c.status FROM stock_outbox o JOIN user_coupon c ON c.id = o.coupon_id \
         WHERE o.template_id = $1 AND c.status <> 'revoked' LIMIT $2",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}

/// I5: coupons whose use was undone before it was made.
pub async fn audit_undone_before_use(
    pg: &PgPool,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT l.coupon_id FROM coupon_use_log l JOIN user_coupon c ON c.id = l.coupon_id \
         WHERE c.template_id = $1 AND l.undone AND l.undone_at < l.used_at LIMIT $2",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}

/// I12: coupons still locked more than `grace_ms` after their lock lapsed: (coupon, order,
/// milliseconds past the lapse).
pub async fn audit_overdue_locks(
    pg: &PgPool,
    template: TemplateId,
    grace_ms: i64,
    limit: i64,
) -> EngineResult<Vec<(Uuid, String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT id, order_id, (extract(epoch FROM now() - locked_until) * 1000)::bigint \
         FROM user_coupon WHERE template_id = $1 AND status = 'locked' \
           AND locked_until < now() - make_interval(secs => $2::double precision / 1000) \
         LIMIT $3",
    )
    .bind(template)
    .bind(grace_ms)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}

/// I13: a redemption whose discount is negative or exceeds its order.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UncappedDiscount {
    /// The coupon.
    pub coupon_id: Uuid,
    /// The order.
    pub order_id: String,
    /// The order amount logged.
    pub order_amount: i64,
    /// The discount logged.
    pub discount: i64,
}

/// I13 violations, refunded or not (a refund does not undo what was charged), at most
/// `limit`.
pub async fn audit_uncapped_discounts(
    pg: &PgPool,
    template: TemplateId,
    limit: i64,
) -> EngineResult<Vec<UncappedDiscount>> {
    Ok(sqlx::query_as(
        "SELECT l.coupon_id, l.order_id, l.order_amount, l.discount \
         FROM coupon_use_log l JOIN user_coupon c ON c.id = l.coupon_id \
         WHERE c.template_id = $1 AND (l.discount < 0 OR l.discount > l.order_amount) \
         LIMIT $2",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(pg)
    .await?)
}
