//! The engine's error type: every refusal has a stable code (docs/ARCHITECTURE.md,
//! "HTTP API").

/// Everything an engine operation can answer instead of success.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The template has no stock left.
    #[error("the coupon is sold out")]
    StockEmpty,
    /// The user already holds as many coupons of this template as allowed.
    #[error("per-user limit of {limit} reached")]
    UserLimit {
        /// The template's per-user limit.
        limit: i32,
    },
    /// The template or coupon does not exist.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The coupon belongs to another user.
    #[error("the coupon belongs to another user")]
    NotOwner,
    /// The coupon was already redeemed by a different order.
    #[error("the coupon is already used by another order")]
    AlreadyUsed,
    /// The coupon is locked by another order's checkout (until that order pays, is
    /// cancelled or its lock lapses).
    #[error("the coupon is locked by another order")]
    Locked,
    /// The coupon is past its validity.
    #[error("the coupon has expired")]
    Expired,
    /// The order is below the template's minimum order amount.
    #[error("order amount {amount} is below the minimum of {min}")]
    BelowMinAmount {
        /// The order amount given.
        amount: i64,
        /// The template's minimum order amount.
        min: i64,
    },
    /// The operation is not allowed in the current state (paused template, unused coupon, ...).
    #[error("{0}")]
    InvalidState(String),
    /// The input is malformed or out of range; nothing was changed.
    #[error("{0}")]
    InvalidRequest(String),
    /// Another redemption of the same coupon holds its lock; retry later.
    #[error("another operation on this coupon is in progress")]
    Busy,
    /// A backend failed or timed out; the outcome may be unknown to the caller.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// A Postgres error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A Redis error.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),
}

impl EngineError {
    /// The stable, machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::StockEmpty => "stock_empty",
            Self::UserLimit { .. } => "user_limit",
            Self::NotFound(_) => "not_found",
            Self::NotOwner => "not_owner",
            Self::AlreadyUsed => "already_used",
            Self::Locked => "locked",
            Self::Expired => "expired",
            Self::BelowMinAmount { .. } => "below_min_amount",
            Self::InvalidState(_) => "invalid_state",
            Self::InvalidRequest(_) => "invalid_request",
            Self::Busy => "busy",
            Self::Unavailable(_) | Self::Database(_) | Self::Redis(_) => "unavailable",
        }
    }

    /// True when the caller cannot know whether the operation took effect.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            Self::Unavailable(_) | Self::Database(_) | Self::Redis(_)
        )
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidRequest(msg.into())
    }
}

/// Result alias for engine operations.
pub type EngineResult<T> = Result<T, EngineError>;
