//! Request and response bodies of the API (the OpenAPI schemas are derived from these).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// `POST /v1/templates/{id}/claims`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Idempotency key, 1–64 chars of `[A-Za-z0-9_-]`.
    pub request_id: String,
}

/// A granted claim.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClaimResponse {
    /// The coupon now held.
    pub coupon_id: Uuid,
    /// The template.
    pub template_id: Uuid,
    /// Stock left right after this claim.
    pub remaining_stock: i64,
}

/// `POST /v1/coupons/{id}/redeem`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeemRequest {
    /// The order, 1–64 bytes.
    pub order_id: String,
    /// Order amount in minor units (cents), ≥ 0.
    pub order_amount: i64,
}

/// A redemption.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RedeemResponse {
    /// The coupon.
    pub coupon_id: Uuid,
    /// The order.
    pub order_id: String,
    /// Amount off, minor units.
    pub discount: i64,
}

/// `POST /v1/coupons/{id}/refund`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundRequest {
    /// The order whose redemption is refunded.
    pub order_id: String,
}

/// A refund.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RefundResponse {
    /// The coupon.
    pub coupon_id: Uuid,
    /// `issued` (returned to the user) or `revoked` (returned to stock).
    pub status: String,
}

/// `POST /v1/admin/user-tokens`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The user, 1–64 chars of `[A-Za-z0-9_-]`.
    pub user_id: String,
}

/// A user token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// Bearer token for the user.
    pub token: String,
}

/// An error body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an error.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code: stock_empty, user_limit, not_found, not_owner, already_used, expired,
    /// below_min_amount, invalid_state, invalid_request, unauthorized, busy, unavailable.
    pub code: String,
    /// Human-readable reason.
    pub message: String,
}

/// Health of the backends.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` or `unavailable`.
    pub status: String,
}
