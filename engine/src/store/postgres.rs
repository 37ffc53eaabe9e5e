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
use crate::store::redis::PendingIntent;

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
    let sql = format!(
        "INSERT INTO coupon_template ({TEMPLATE_COLUMNS}) VALUES \
         ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,'active') RETURNING {TEMPLATE_COLUMNS}"
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
    sqlx::query_scalar("SELECT epoch FROM coupon_template WHERE id = $1")
        .bind(template)
        .fetch_optional(conn)
        .await?
        .ok_or(EngineError::NotFound("template"))
}

/// What persisting one intent found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Persisted {
    /// The row exists with the intent's coupon id (written now or earlier).
    Stored,
    /// Another coupon already holds this request id: the intent is a duplicate.
    Duplicate {
        /// The coupon already stored for the request id.
        coupon_id: Uuid,
        /// Its owner.
        user_id: String,
    },
    /// The intent's epoch is older than the template's: a rebuild counted without it.
    Fenced,
    /// The intent's epoch is newer than Postgres knows: Redis holds a rebuild whose
    /// transaction never committed, and must be rebuilt again.
    EpochAhead,
}

/// Persists claim intents of one template in one transaction with one multi-row INSERT
/// (roll-forward: whoever persists writes the same rows, so nothing is issued twice).
/// Returns one verdict per intent, in order.
pub async fn persist_intents(
    pool: &PgPool,
    template: &Template,
    intents: &[PendingIntent],
) -> EngineResult<Vec<Persisted>> {
    let mut tx = pool.begin().await?;
    lock_template(&mut tx, template.id, false).await?;
    let current = epoch(&mut tx, template.id).await?;
    let live: Vec<&PendingIntent> = intents.iter().filter(|i| i.epoch == current).collect();
    if !live.is_empty() {
        let mut ids = Vec::with_capacity(live.len());
        let mut users = Vec::with_capacity(live.len());
        let mut rids = Vec::with_capacity(live.len());
        let mut at = Vec::with_capacity(live.len());
        let mut from = Vec::with_capacity(live.len());
        let mut until = Vec::with_capacity(live.len());
        for i in &live {
            let claimed_at = ms_to_time(i.claimed_at_ms);
            let (f, u) = template.coupon_validity(claimed_at);
            ids.push(i.coupon_id);
            users.push(i.user_id.as_str());
            rids.push(i.request_id.as_str());
            at.push(claimed_at);
            from.push(f);
            until.push(u);
        }
        sqlx::query(
            "INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id, \
             claimed_at, valid_from, valid_until) \
             SELECT u.id, $1, u.user_id, 'issued', u.rid, u.at, u.vf, u.vu \
             FROM UNNEST($2::uuid[], $3::text[], $4::text[], $5::timestamptz[], \
                         $6::timestamptz[], $7::timestamptz[]) AS u(id, user_id, rid, at, vf, vu) \
             ON CONFLICT (template_id, claim_request_id) DO NOTHING",
        )
        .bind(template.id)
        .bind(&ids)
        .bind(&users)
        .bind(&rids)
        .bind(&at)
        .bind(&from)
        .bind(&until)
        .execute(&mut *tx)
        .await?;
    }
    let rids: Vec<&str> = intents.iter().map(|i| i.request_id.as_str()).collect();
    let stored: Vec<(String, Uuid, String)> = sqlx::query_as(
        "SELECT claim_request_id, id, user_id FROM user_coupon \
         WHERE template_id = $1 AND claim_request_id = ANY($2)",
    )
    .bind(template.id)
    .bind(&rids)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(intents
        .iter()
        .map(
            |i| match stored.iter().find(|(rid, _, _)| *rid == i.request_id) {
                Some((_, id, _)) if *id == i.coupon_id => Persisted::Stored,
                Some((_, id, user)) => Persisted::Duplicate {
                    coupon_id: *id,
                    user_id: user.clone(),
                },
                None if i.epoch > current => Persisted::EpochAhead,
                None => Persisted::Fenced,
            },
        )
        .collect())
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

/// Bumps the template's epoch (rebuild, under the exclusive lock); returns the new one.
pub async fn bump_epoch(conn: &mut PgConnection, template: Uuid) -> EngineResult<i64> {
    sqlx::query_scalar("UPDATE coupon_template SET epoch = epoch + 1 WHERE id = $1 RETURNING epoch")
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
