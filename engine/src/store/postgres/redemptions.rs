//! `user_coupon` through redeem and refund: each change is one conditional UPDATE (the guard
//! that makes it safe without any lock), and when it matches nothing, one read that explains
//! why. The use-log half of each transaction is in `use_log`.

use sqlx::{Row, postgres::PgExecutor};
use uuid::Uuid;

use crate::{
    domain::{
        coupon::CouponStatus,
        discount::{Discount, DiscountKind},
        ids::{TemplateId, UserId},
    },
    error::{EngineError, EngineResult},
};

/// Marks a valid coupon of `user_id` used by `order_id` if the order reaches the template's
/// minimum and the coupon is issued, locked by this order, or locked by a lapsed lock (an
/// order that never paid); returns the template's discount, or None when nothing matched.
pub async fn mark_used(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
    order_amount: i64,
) -> EngineResult<Option<Discount>> {
    let row = sqlx::query(
        "UPDATE user_coupon c SET status = 'used', order_id = $3, used_at = now(), \
                locked_until = NULL \
         FROM coupon_template t \
         WHERE c.id = $1 AND c.user_id = $2 \
           AND (c.status = 'issued' OR (c.status = 'locked' \
                AND (c.order_id = $3 OR c.locked_until <= now()))) \
           AND now() >= c.valid_from AND now() < c.valid_until \
           AND t.id = c.template_id AND $4 >= COALESCE(t.min_order_amount, 0) \
         RETURNING t.discount_kind, t.discount_amount, t.discount_percent, \
                   t.min_order_amount, t.max_discount",
    )
    .bind(coupon)
    .bind(user_id.as_str())
    .bind(order_id)
    .bind(order_amount)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(discount_from_row).transpose()
}

fn discount_from_row(row: &sqlx::postgres::PgRow) -> EngineResult<Discount> {
    let kind: String = row.try_get("discount_kind")?;
    Ok(Discount {
        kind: DiscountKind::parse(&kind)
            .ok_or_else(|| EngineError::Unavailable("unknown discount kind stored".into()))?,
        amount: row.try_get("discount_amount")?,
        percent: row.try_get("discount_percent")?,
        min_order_amount: row.try_get("min_order_amount")?,
        max_discount: row.try_get("max_discount")?,
    })
}

/// What a redemption that matched nothing needs to explain itself.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RedeemState {
    /// The coupon's owner.
    pub user_id: String,
    /// Its stored status, as stored.
    pub status: String,
    /// The order that used it, if used.
    pub order_id: Option<String>,
    /// Its checkout lock has lapsed (treated as issued).
    pub lapsed: bool,
    /// Past its validity.
    pub past: bool,
    /// Not valid yet.
    pub early: bool,
    /// The template's minimum order amount.
    pub min_order_amount: Option<i64>,
    /// The discount logged for this very order, if it used the coupon and was not refunded.
    pub discount: Option<i64>,
}

/// The state of `coupon` as seen by a redemption for `order_id`; None if no such coupon.
pub async fn redeem_state(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    order_id: &str,
) -> EngineResult<Option<RedeemState>> {
    Ok(sqlx::query_as(
        "SELECT c.user_id, c.status, c.order_id, now() >= c.valid_until AS past, \
                c.status = 'locked' AND c.locked_until <= now() AS lapsed, \
                now() < c.valid_from AS early, t.min_order_amount, l.discount \
         FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id \
         LEFT JOIN coupon_use_log l ON l.coupon_id = c.id AND l.order_id = $2 AND NOT l.undone \
         WHERE c.id = $1",
    )
    .bind(coupon)
    .bind(order_id)
    .fetch_optional(conn)
    .await?)
}

/// Gives a coupon used by `order_id` back per its template's policy: to the user (`issued`,
/// its validity extended by the time it was used if the template says so) or to stock
/// (`revoked`). Returns its template and new status, or None when nothing matched.
pub async fn restore_used(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> EngineResult<Option<(TemplateId, CouponStatus)>> {
    let row = sqlx::query(
        "UPDATE user_coupon c SET \
           status = CASE WHEN t.refund_policy = 'return_to_stock' THEN 'revoked' ELSE 'issued' END, \
           order_id = NULL, used_at = NULL, \
           valid_until = CASE WHEN t.refund_policy = 'return_to_user' AND t.extend_validity_on_refund \
                              THEN c.valid_until + (now() - c.used_at) ELSE c.valid_until END \
         FROM coupon_template t \
         WHERE c.id = $1 AND c.user_id = $2 AND c.status = 'used' AND c.order_id = $3 \
           AND t.id = c.template_id \
         RETURNING c.template_id, c.status",
    )
    .bind(coupon)
    .bind(user_id.as_str())
    .bind(order_id)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let template_id: TemplateId = row.try_get("template_id")?;
    let status: String = row.try_get("status")?;
    let status = CouponStatus::parse(&status)
        .ok_or_else(|| EngineError::Unavailable("unknown coupon status".into()))?;
    Ok(Some((template_id, status)))
}

/// What a refund that matched nothing needs to explain itself.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefundState {
    /// The coupon's owner.
    pub user_id: String,
    /// Its stored status, as stored.
    pub status: String,
    /// The template's refund policy, as stored.
    pub refund_policy: String,
    /// True if a use by this order was already undone.
    pub refunded: bool,
}

/// The state of `coupon` as seen by a refund of `order_id`; None if no such coupon.
pub async fn refund_state(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    order_id: &str,
) -> EngineResult<Option<RefundState>> {
    Ok(sqlx::query_as(
        "SELECT c.user_id, c.status, c.order_id, t.refund_policy, \
                EXISTS (SELECT 1 FROM coupon_use_log l \
                        WHERE l.coupon_id = c.id AND l.order_id = $2 AND l.undone) AS refunded \
         FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id WHERE c.id = $1",
    )
    .bind(coupon)
    .bind(order_id)
    .fetch_optional(conn)
    .await?)
}
