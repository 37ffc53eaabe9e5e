//! `coupon_template`: the templates and which of them background work looks at. A template's
//! counter row (`template_stock`) is born in the same statement, so none exists without it.

// Dynamic SQL here only splices the constant column list below, never input.
use sqlx::{AssertSqlSafe, PgPool, Row, postgres::PgRow};

use super::corrupt;
use crate::{
    domain::{
        discount::{Discount, DiscountKind},
        ids::TemplateId,
        template::{NewTemplate, RefundPolicy, Template, TemplateStatus},
    },
    error::EngineResult,
};

const TEMPLATE_COLUMNS: &str = "id, name, total_stock, per_user_limit, discount_kind, \
    discount_amount, discount_percent, min_order_amount, max_discount, valid_from, valid_until, \
    valid_days, claim_starts_at, claim_ends_at, refund_policy, extend_validity_on_refund, status";

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

/// Inserts a validated template.
pub async fn insert_template(
    pool: &PgPool,
    id: TemplateId,
    t: &NewTemplate,
) -> EngineResult<Template> {
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
pub async fn get_template(pool: &PgPool, id: TemplateId) -> EngineResult<Option<Template>> {
    let sql = format!("SELECT {TEMPLATE_COLUMNS} FROM coupon_template WHERE id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(template_from_row).transpose()
}

/// Ids of every template (for the reconciler).
pub async fn template_ids(pool: &PgPool) -> EngineResult<Vec<TemplateId>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM coupon_template ORDER BY created_at")
            .fetch_all(pool)
            .await?,
    )
}

/// Sets a template's status; false if it does not exist.
pub async fn set_template_status(
    pool: &PgPool,
    id: TemplateId,
    status: TemplateStatus,
) -> EngineResult<bool> {
    let done = sqlx::query("UPDATE coupon_template SET status = $2 WHERE id = $1")
        .bind(id)
        .bind(status.as_str())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Templates background work must look at: open for claims (or closed within the last
/// hour, while late intents may still settle), or with refunds whose stock is not back yet.
/// Ended sales cost nothing.
pub async fn live_template_ids(pool: &PgPool) -> EngineResult<Vec<TemplateId>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM coupon_template \
         WHERE status <> 'ended' AND (claim_ends_at IS NULL OR claim_ends_at > now() - interval '1 hour') \
         UNION SELECT DISTINCT template_id FROM stock_outbox WHERE applied_at IS NULL",
    )
    .fetch_all(pool)
    .await?)
}
