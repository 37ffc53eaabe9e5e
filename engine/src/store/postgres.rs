//! Postgres side of the engine: templates, coupons, the use log and the stock outbox.
//! Every multi-statement change runs in one transaction; the conditional UPDATEs and the
//! unique indexes, not the Redis lock, are what make redeem and refund safe.

// Dynamic SQL here only splices the constant column lists below, never input.
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres, Row, Transaction, postgres::PgRow};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::{
    coupon::{Coupon, CouponStatus},
    discount::{Discount, DiscountKind},
    template::{NewTemplate, RefundPolicy, Template, TemplateStatus},
};
use crate::error::{EngineError, EngineResult};

/// The embedded migrations (`migrations/` at the workspace root).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

const TEMPLATE_COLUMNS: &str = "id, name, total_stock, per_user_limit, discount_kind, \
    discount_amount, discount_percent, min_order_amount, max_discount, valid_from, valid_until, \
    valid_days, claim_starts_at, claim_ends_at, refund_policy, extend_validity_on_refund, status";

const COUPON_COLUMNS: &str =
    "id, template_id, user_id, status, order_id, claimed_at, valid_from, valid_until, used_at";

fn corrupt(what: &str) -> EngineError {
    EngineError::Database(sqlx::Error::Protocol(format!(
        "unexpected stored value: {what}"
    )))
}

fn template_from_row(row: &PgRow) -> EngineResult<Template> {
    let kind: String = row.try_get("discount_kind")?;
    let policy: String = row.try_get("refund_policy")?;
    let status: String = row.try_get("status")?;
    Ok(Template {
        id: row.try_get("id")?,
        spec: NewTemplate {
            name: row.try_get("name")?,
            total_stock: row.try_get("total_stock")?,
            per_user_limit: row.try_get("per_user_limit")?,
            discount: Discount {
                kind: DiscountKind::parse(&kind).ok_or_else(|| corrupt("discount_kind"))?,
                amount: row.try_get("discount_amount")?,
                percent: row.try_get("discount_percent")?,
                min_order_amount: row.try_get("min_order_amount")?,
                max_discount: row.try_get("max_discount")?,
            },
            valid_from: row.try_get("valid_from")?,
            valid_until: row.try_get("valid_until")?,
            valid_days: row.try_get("valid_days")?,
            claim_starts_at: row.try_get("claim_starts_at")?,
            claim_ends_at: row.try_get("claim_ends_at")?,
            refund_policy: RefundPolicy::parse(&policy).ok_or_else(|| corrupt("refund_policy"))?,
            extend_validity_on_refund: row.try_get("extend_validity_on_refund")?,
        },
        status: TemplateStatus::parse(&status).ok_or_else(|| corrupt("status"))?,
    })
}

/// Reads a coupon row.
pub fn coupon_from_row(row: &PgRow) -> EngineResult<Coupon> {
    let status: String = row.try_get("status")?;
    Ok(Coupon {
        id: row.try_get("id")?,
        template_id: row.try_get("template_id")?,
        user_id: row.try_get("user_id")?,
        status: CouponStatus::parse(&status).ok_or_else(|| corrupt("coupon status"))?,
        order_id: row.try_get("order_id")?,
        claimed_at: row.try_get("claimed_at")?,
        valid_from: row.try_get("valid_from")?,
        valid_until: row.try_get("valid_until")?,
        used_at: row.try_get("used_at")?,
    })
}

/// Inserts a validated template.
pub async fn insert_template(pool: &PgPool, id: Uuid, t: &NewTemplate) -> EngineResult<Template> {
    // The counter row is born with the template (one statement, so never one without it).
    let sql = format!(
        "WITH t AS (INSERT INTO coupon_template ({TEMPLATE_COLUMNS}) VALUES \
         ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,'active') \
         RETURNING {TEMPLATE_COLUMNS}), \
         s AS (INSERT INTO template_stock (template_id, total_stock) \
               SELECT id, total_stock FROM t) \
         SELECT {TEMPLATE_COLUMNS} FROM t"
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .bind(&t.name)
        .bind(t.total_stock)
        .bind(t.per_user_limit)
        .bind(t.discount.kind.as_str())
        .bind(t.discount.amount)
        .bind(t.discount.percent)
        .bind(t.discount.min_order_amount)
        .bind(t.discount.max_discount)
        .bind(t.valid_from)
        .bind(t.valid_until)
        .bind(t.valid_days)
        .bind(t.claim_starts_at)
        .bind(t.claim_ends_at)
        .bind(t.refund_policy.as_str())
        .bind(t.extend_validity_on_refund)
        .fetch_one(pool)
        .await?;
    template_from_row(&row)
}

/// Loads a template.
pub async fn get_template(pool: &PgPool, id: Uuid) -> EngineResult<Option<Template>> {
    let sql = format!("SELECT {TEMPLATE_COLUMNS} FROM coupon_template WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(template_from_row).transpose()
}

/// Ids of every template (for the reconciler).
pub async fn template_ids(pool: &PgPool) -> EngineResult<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM coupon_template ORDER BY created_at")
            .fetch_all(pool)
            .await?,
    )
}

/// Sets a template's status; false if it does not exist.
pub async fn set_template_status(
    pool: &PgPool,
    id: Uuid,
    status: TemplateStatus,
) -> EngineResult<bool> {
    let done = sqlx::query("UPDATE coupon_template SET status = $2 WHERE id = $1")
        .bind(id)
        .bind(status.as_str())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Takes the template's advisory lock for this transaction: shared for writers that must
/// not cross a rebuild (persist, outbox relay), exclusive for the rebuild itself.
pub async fn lock_template(
    conn: &mut PgConnection,
    template: Uuid,
    exclusive: bool,
) -> EngineResult<()> {
    let sql = if exclusive {
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))"
    } else {
        "SELECT pg_advisory_xact_lock_shared(hashtextextended($1::text, 0))"
    };
    sqlx::query(sql).bind(template).execute(conn).await?;
    Ok(())
}

/// The template's current fencing epoch.
pub async fn epoch(conn: &mut PgConnection, template: Uuid) -> EngineResult<i64> {
    sqlx::query_scalar("SELECT epoch FROM template_stock WHERE template_id = $1")
        .bind(template)
        .fetch_optional(conn)
        .await?
        .ok_or(EngineError::NotFound("template"))
}

/// A return_to_stock refund gives its coupon's place back in the counter (inside the
/// refund's transaction, so it cannot race a rebuild or a claim batch).
pub async fn return_to_stock(conn: &mut PgConnection, template: Uuid) -> EngineResult<()> {
    sqlx::query("UPDATE template_stock SET counted = counted - 1 WHERE template_id = $1")
        .bind(template)
        .execute(conn)
        .await?;
    Ok(())
}

/// Milliseconds since the Unix epoch to a timestamp (clamped to now on overflow).
pub fn ms_to_time(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or_else(|_| OffsetDateTime::now_utc())
}

/// Counts for a rebuild: coupons counting against stock per user.
pub async fn counted_per_user(
    conn: &mut PgConnection,
    template: Uuid,
) -> EngineResult<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT user_id, count(*) FROM user_coupon \
         WHERE template_id = $1 AND status <> 'revoked' GROUP BY user_id ORDER BY user_id",
    )
    .bind(template)
    .fetch_all(conn)
    .await?)
}

/// A persisted claim still inside the idempotency window.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecentClaim {
    /// The idempotency key.
    pub claim_request_id: String,
    /// The coupon it was given.
    pub id: Uuid,
    /// The claimant.
    pub user_id: String,
    /// Milliseconds the outcome must still be remembered.
    pub ttl_ms: i64,
}

/// Claims of a template made within the last `window_ms` (for a rebuild to remember them).
pub async fn recent_claims(
    conn: &mut PgConnection,
    template: Uuid,
    window_ms: i64,
) -> EngineResult<Vec<RecentClaim>> {
    Ok(sqlx::query_as(
        "SELECT claim_request_id, id, user_id, \
                ($2 - (extract(epoch FROM now() - claimed_at) * 1000))::bigint AS ttl_ms \
         FROM user_coupon WHERE template_id = $1 \
           AND claimed_at > now() - make_interval(secs => $2::double precision / 1000)",
    )
    .bind(template)
    .bind(window_ms)
    .fetch_all(conn)
    .await?)
}

/// Gives the template a new epoch from the sequence (rebuild, under the exclusive lock):
/// a number an aborted rebuild consumed is never handed out again. Also takes the
/// template's counter row, so no claim batch or refund to stock runs until commit.
pub async fn bump_epoch(conn: &mut PgConnection, template: Uuid) -> EngineResult<i64> {
    sqlx::query_scalar(
        "UPDATE template_stock SET epoch = nextval('coupon_epoch_seq') \
         WHERE template_id = $1 RETURNING epoch",
    )
    .bind(template)
    .fetch_optional(conn)
    .await?
    .ok_or(EngineError::NotFound("template"))
}

/// Marks every unapplied outbox row of a template applied (a rebuild counted them).
pub async fn settle_outbox(conn: &mut PgConnection, template: Uuid) -> EngineResult<u64> {
    Ok(sqlx::query(
        "UPDATE stock_outbox SET applied_at = now() WHERE template_id = $1 AND applied_at IS NULL",
    )
    .bind(template)
    .execute(conn)
    .await?
    .rows_affected())
}

/// An outbox row waiting to be applied to Redis.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    /// Row id (the exactly-once key in Redis).
    pub id: i64,
    /// The refunded coupon.
    pub coupon_id: Uuid,
    /// Its owner, whose quota is returned.
    pub user_id: String,
}

/// Locks up to `limit` unapplied outbox rows of a template (skipping rows another relay holds).
pub async fn lock_outbox(
    tx: &mut Transaction<'_, Postgres>,
    template: Uuid,
    limit: i64,
) -> EngineResult<Vec<OutboxRow>> {
    Ok(sqlx::query_as(
        "SELECT id, coupon_id, user_id FROM stock_outbox \
         WHERE template_id = $1 AND applied_at IS NULL ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(template)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
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
pub async fn user_coupons(pool: &PgPool, user_id: &str, limit: i64) -> EngineResult<Vec<Coupon>> {
    let sql = format!(
        "SELECT {COUPON_COLUMNS} FROM user_coupon WHERE user_id = $1 \
         ORDER BY claimed_at DESC, id LIMIT $2"
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(user_id)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.iter().map(coupon_from_row).collect()
}

/// All coupons of a template (tests, audits of small templates).
pub async fn template_coupons(pool: &PgPool, template: Uuid) -> EngineResult<Vec<Coupon>> {
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

/// True if `err` is a unique violation of the named constraint or index.
pub fn is_unique_violation(err: &sqlx::Error, constraint: &str) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.code().as_deref() == Some("23505") && db.constraint() == Some(constraint)
        }
        _ => false,
    }
}

/// The coupon id and owner stored for a claim request id, if any.
pub async fn claim_by_request(
    conn: &mut sqlx::PgConnection,
    template: Uuid,
    request_id: &str,
) -> EngineResult<Option<(Uuid, String)>> {
    Ok(sqlx::query_as(
        "SELECT id, user_id FROM user_coupon WHERE template_id = $1 AND claim_request_id = $2",
    )
    .bind(template)
    .bind(request_id)
    .fetch_optional(conn)
    .await?)
}

/// Templates background work must look at: open for claims (or closed within the last
/// hour, while late intents may still settle), or with refunds whose stock is not back yet.
/// Ended sales cost nothing.
pub async fn live_template_ids(pool: &PgPool) -> EngineResult<Vec<Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM coupon_template \
         WHERE status <> 'ended' AND (claim_ends_at IS NULL OR claim_ends_at > now() - interval '1 hour') \
         UNION SELECT DISTINCT template_id FROM stock_outbox WHERE applied_at IS NULL",
    )
    .fetch_all(pool)
    .await?)
}

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
