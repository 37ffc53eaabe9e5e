//! Records that cross from one store to the other: read from Postgres and written to Redis.
//! Neither store module owns them, so neither imports the other.

use uuid::Uuid;

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
