//! `coupon_use_log`: one row per redemption, marked undone by its refund. The unique keys on
//! it (one row per coupon and order, one live row per coupon) are what refuse a second use.

use sqlx::postgres::PgExecutor;
use uuid::Uuid;

use super::is_unique_violation;
use crate::{
    domain::ids::UserId,
    error::{EngineError, EngineResult},
};

/// One redemption as the log records it.
#[derive(Debug, Clone, Copy)]
pub struct UseRecord<'a> {
    /// The coupon used.
    pub coupon_id: Uuid,
    /// The order it was used for.
    pub order_id: &'a str,
    /// The coupon's owner.
    pub user_id: &'a UserId,
    /// The order's amount (minor units).
    pub order_amount: i64,
    /// What was taken off it.
    pub discount: i64,
}

/// What a use-log insert does when a unique key already holds the redemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Fails with the unique violation (see [`is_order_logged`]).
    Refuse,
    /// Inserts nothing and succeeds: mutant D2's defect, which lets a second use stand.
    #[cfg(feature = "mutants")]
    Ignore,
}

/// Logs a redemption at the transaction's time.
pub async fn log_use(
    conn: impl PgExecutor<'_>,
    u: &UseRecord<'_>,
    on_conflict: OnConflict,
) -> EngineResult<()> {
    let sql = match on_conflict {
        OnConflict::Refuse => {
            "INSERT INTO coupon_use_log (coupon_id, order_id, user_id, order_amount, discount, used_at) \
             VALUES ($1, $2, $3, $4, $5, now())"
        }
        #[cfg(feature = "mutants")]
        OnConflict::Ignore => {
            "INSERT INTO coupon_use_log (coupon_id, order_id, user_id, order_amount, discount, used_at) \
             VALUES ($1, $2, $3, $4, $5, now()) ON CONFLICT DO NOTHING"
        }
    };
    sqlx::query(sql)
        .bind(u.coupon_id)
        .bind(u.order_id)
        .bind(u.user_id.as_str())
        .bind(u.order_amount)
        .bind(u.discount)
        .execute(conn)
        .await?;
    Ok(())
}

/// True if [`log_use`] failed because this order already used this coupon (and was
/// refunded, since a live use would have stopped the redemption before the insert).
pub fn is_order_logged(err: &EngineError) -> bool {
    matches!(err, EngineError::Database(e) if is_unique_violation(e, "coupon_use_log_coupon_order_key"))
}

/// Marks the live use of `coupon` by `order_id` undone; returns the rows marked (0 or 1).
pub async fn mark_use_undone(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    order_id: &str,
) -> EngineResult<u64> {
    // clock_timestamp(), not now(): a refund that began before the redemption it undoes
    // waited for that redemption's row lock, so its transaction started earlier than the
    // use it records undoing (the auditor's I5 saw "refunded before it was used").
    Ok(sqlx::query(
        "UPDATE coupon_use_log SET undone = true, undone_at = clock_timestamp() \
         WHERE coupon_id = $1 AND order_id = $2 AND NOT undone",
    )
    .bind(coupon)
    .bind(order_id)
    .execute(conn)
    .await?
    .rows_affected())
}
