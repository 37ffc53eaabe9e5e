//! `user_coupon` through checkout: an order locks a coupon (`issued → locked`), releases it
//! on cancel (`locked → issued`), and the sweep releases locks whose order never paid. Like
//! redeem, each change is one conditional UPDATE — the guard that makes it safe — and when
//! it matches nothing, one read explains why. A lock past `locked_until` has lapsed: every
//! statement treats it as `issued`, so a lapsed lock never blocks a sale while it waits for
//! the sweep.

use sqlx::postgres::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{domain::ids::UserId, error::EngineResult};

/// Locks a valid coupon of `user_id` for `order_id` until `now() + ttl_ms`, if it is issued
/// or its lock has lapsed; returns the lock's end, or None when nothing matched.
pub async fn lock_for_order(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
    ttl_ms: i64,
) -> EngineResult<Option<OffsetDateTime>> {
    Ok(sqlx::query_scalar(
        "UPDATE user_coupon SET status = 'locked', order_id = $3, \
                locked_until = now() + make_interval(secs => $4::double precision / 1000) \
         WHERE id = $1 AND user_id = $2 \
           AND (status = 'issued' OR (status = 'locked' AND locked_until <= now())) \
           AND now() >= valid_from AND now() < valid_until \
         RETURNING locked_until",
    )
    .bind(coupon)
    .bind(user_id.as_str())
    .bind(order_id)
    .bind(ttl_ms)
    .fetch_optional(conn)
    .await?)
}

/// Releases the lock `order_id` holds on a coupon of `user_id` (a cancelled order); true if
/// it held one.
pub async fn release_order_lock(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
    user_id: &UserId,
    order_id: &str,
) -> EngineResult<bool> {
    let n = sqlx::query(
        "UPDATE user_coupon SET status = 'issued', order_id = NULL, locked_until = NULL \
         WHERE id = $1 AND user_id = $2 AND status = 'locked' AND order_id = $3",
    )
    .bind(coupon)
    .bind(user_id.as_str())
    .bind(order_id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// What a lock or release that matched nothing needs to explain itself.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CheckoutState {
    /// The coupon's owner.
    pub user_id: String,
    /// Its stored status, as stored.
    pub status: String,
    /// The order holding it (locked or used), if any.
    pub order_id: Option<String>,
    /// The end of its lock, while locked.
    pub locked_until: Option<OffsetDateTime>,
    /// Its lock has lapsed (treated as issued).
    pub lapsed: bool,
    /// Past its validity.
    pub past: bool,
    /// Not valid yet.
    pub early: bool,
}

/// The state of `coupon` as a lock or release sees it; None if no such coupon.
pub async fn checkout_state(
    conn: impl PgExecutor<'_>,
    coupon: Uuid,
) -> EngineResult<Option<CheckoutState>> {
    Ok(sqlx::query_as(
        "SELECT user_id, status, order_id, locked_until, \
                status = 'locked' AND locked_until <= now() AS lapsed, \
                now() >= valid_until AS past, now() < valid_from AS early \
         FROM user_coupon WHERE id = $1",
    )
    .bind(coupon)
    .fetch_optional(conn)
    .await?)
}

/// Releases up to `batch` lapsed locks (orders that never paid); returns how many.
pub async fn release_lapsed_locks(conn: impl PgExecutor<'_>, batch: i64) -> EngineResult<u64> {
    Ok(sqlx::query(
        "WITH due AS (SELECT id FROM user_coupon WHERE status = 'locked' AND locked_until <= now() \
                      ORDER BY locked_until LIMIT $1 FOR UPDATE SKIP LOCKED) \
         UPDATE user_coupon c SET status = 'issued', order_id = NULL, locked_until = NULL \
         FROM due WHERE c.id = due.id AND c.status = 'locked' AND c.locked_until <= now()",
    )
    .bind(batch)
    .execute(conn)
    .await?
    .rows_affected())
}
