//! Request and response bodies of the API. The OpenAPI schemas are derived from these, and
//! every constraint the server enforces that JSON Schema can state is stated here, so that a
//! schema-valid request is one the server accepts (issue 15).
//!
//! Types ending in `Doc` describe a body the handler (de)serializes with an engine type; they
//! exist only for the description and are checked against the real types by tests.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

mod schema;

pub use schema::{
    DISCOUNT_VARIANTS, NewTemplateDoc, discount_schema, discount_variant_schemas,
    new_template_schema,
};
use schema::{coupon_status_schema, discount_ref, refund_policy_schema, template_status_schema};

/// `[A-Za-z0-9_-]`, the alphabet of user and request ids (`domain::ids`).
pub const ID_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// No control character (Unicode `Cc`, what `char::is_control` refuses in order ids).
pub const ORDER_ID_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$";
/// A canonical hyphenated UUID; the server refuses the other forms `uuid` would parse.
pub const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
/// At least one character that is not Unicode `White_Space` (what `str::trim` strips), and
/// no NUL (Postgres `text` cannot hold it).
pub const NAME_PATTERN: &str = "^[^\\u0000]*[^\\u0000\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\u0000]*$";
/// Longest template name, in UTF-8 bytes.
pub const MAX_NAME_BYTES: usize = 200;
/// Longest validity in days.
pub const MAX_VALID_DAYS: i32 = 3650;

/// `POST /v1/templates/{id}/claims`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Idempotency key, 1–64 chars of `[A-Za-z0-9_-]`.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
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
    /// The order: 1–64 bytes of UTF-8 (64 ASCII characters, fewer when some take several
    /// bytes), no control characters.
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub order_id: String,
    /// Order amount in minor units (cents), ≥ 0. Taken as given: this is why redeem belongs
    /// to the order service, which knows the real amount, rather than to the shopper.
    #[schema(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub order_amount: i64,
    /// The user the order belongs to: required with the service token (the coupon must be
    /// theirs); with a user token optional, and if given it must name the token's user.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    pub user_id: Option<String>,
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
    /// The order whose redemption is refunded (same rules as in a redemption).
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub order_id: String,
    /// The user the order belongs to: required with the service token; with a user token
    /// optional, and if given it must name the token's user.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    pub user_id: Option<String>,
}

/// `POST /v1/coupons/{id}/lock`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LockRequest {
    /// The order being placed (same rules as in a redemption).
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub order_id: String,
    /// The user the order belongs to: required with the service token; with a user token
    /// optional, and if given it must name the token's user.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    pub user_id: Option<String>,
    /// Seconds the lock holds the coupon unless the order is paid or cancelled first
    /// (1 to 86,400); absent or null: the server's default (15 minutes).
    #[schema(minimum = 1, maximum = 86_400)]
    pub ttl_secs: Option<i64>,
}

/// A checkout lock.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LockResponse {
    /// The coupon.
    pub coupon_id: Uuid,
    /// The order holding it.
    pub order_id: String,
    /// When the lock lapses unless the order is paid (redeem) or cancelled (release) first.
    #[serde(with = "time::serde::rfc3339")]
    pub locked_until: OffsetDateTime,
}

/// `POST /v1/coupons/{id}/release`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The cancelled order (same rules as in a redemption).
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub order_id: String,
    /// The user the order belongs to: required with the service token; with a user token
    /// optional, and if given it must name the token's user.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    pub user_id: Option<String>,
}

/// A release.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReleaseResponse {
    /// The coupon.
    pub coupon_id: Uuid,
    /// True if the order held a lock that this released; false if it held none (already
    /// released, or lapsed): either way the order no longer holds the coupon.
    pub released: bool,
}

/// A refund.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RefundResponse {
    /// The coupon.
    pub coupon_id: Uuid,
    /// `issued` (returned to the user) or `revoked` (returned to stock).
    #[schema(pattern = "^(issued|revoked)$")]
    pub status: String,
}

/// `POST /v1/admin/user-tokens`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The user, 1–64 chars of `[A-Za-z0-9_-]`.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]+$")]
    pub user_id: String,
    /// Seconds the token stays valid (1 to 10 years' worth); absent or null: no expiry.
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub ttl_secs: Option<i64>,
}

/// Longest `ttl_secs` of a minted token: ten years.
pub const MAX_TOKEN_TTL_SECS: i64 = 315_360_000;

/// A user token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// Bearer token for the user: `<user_id>.<hex HMAC-SHA256(secret, user_id)>`, or with a
    /// ttl `<user_id>.<expires_at>.<hex HMAC-SHA256(secret, "<user_id>.<expires_at>")>`.
    pub token: String,
    /// When the token expires, Unix seconds; null for a token without expiry.
    pub expires_at: Option<i64>,
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
    /// Stable, machine-readable code.
    #[schema(value_type = ErrorCode)]
    pub code: String,
    /// Human-readable reason.
    pub message: String,
}

/// Every error code the API answers (the HTTP status says the class).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 409: the template has no stock left.
    StockEmpty,
    /// 409: the user holds as many coupons of the template as allowed.
    UserLimit,
    /// 404: no such template, coupon or route.
    NotFound,
    /// 403: the coupon belongs to another user.
    NotOwner,
    /// 409: the coupon is used by another order.
    AlreadyUsed,
    /// 409: the coupon is locked by another order's checkout.
    Locked,
    /// 409: the coupon is past its validity.
    Expired,
    /// 409: the order is below the template's minimum order amount.
    BelowMinAmount,
    /// 409: not allowed in the current state.
    InvalidState,
    /// 400: malformed or out-of-range input; nothing changed.
    InvalidRequest,
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 401: missing, invalid or expired token.
    Unauthorized,
    /// 403: the token's role may not call the operation (a shopper's lock, redeem, release
    /// or refund on a server with a service token).
    Forbidden,
    /// 429: another redemption of the coupon is in progress; retry.
    Busy,
    /// 503: a backend failed; the outcome is unknown, retry with the same ids.
    Unavailable,
}

/// Health of the backends.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when a store answers but slowly.
    #[schema(pattern = "^(ok|degraded)$")]
    pub status: String,
    /// The Postgres probe.
    pub postgres: StoreHealthDoc,
    /// The Redis probe.
    pub redis: StoreHealthDoc,
}

/// One store's probe, as `/healthz` answers it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = StoreHealth)]
pub struct StoreHealthDoc {
    /// `ok` or `slow` (a 200 never carries `down`: a store down is a 503).
    #[schema(pattern = "^(ok|slow|down)$")]
    pub state: String,
    /// How long the probe took, milliseconds.
    #[schema(minimum = 0)]
    pub latency_ms: u64,
}

/// A template as answered: what was given at creation, with `id`, `status` and the live
/// `remaining_stock` (`null` while Redis has not been initialised for it).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Template)]
pub struct TemplateDoc {
    /// Template id.
    pub id: Uuid,
    /// Display name.
    pub name: String,
    /// Coupons that may ever count against stock.
    pub total_stock: i64,
    /// Coupons one user may hold.
    pub per_user_limit: i32,
    /// The discount rule.
    #[schema(schema_with = discount_ref)]
    pub discount: serde_json::Value,
    /// Absolute validity start.
    pub valid_from: Option<OffsetDateTime>,
    /// Absolute validity end.
    pub valid_until: Option<OffsetDateTime>,
    /// Validity in days from the claim.
    pub valid_days: Option<i32>,
    /// Claims before this are refused.
    pub claim_starts_at: Option<OffsetDateTime>,
    /// Claims after this are refused.
    pub claim_ends_at: Option<OffsetDateTime>,
    /// What a refund does.
    #[schema(schema_with = refund_policy_schema)]
    pub refund_policy: String,
    /// Extend validity by the time held by a refunded order.
    pub extend_validity_on_refund: bool,
    /// Whether claims are accepted.
    #[schema(schema_with = template_status_schema)]
    pub status: String,
    /// Live remaining stock.
    pub remaining_stock: Option<i64>,
}

/// A claimed coupon.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Coupon)]
pub struct CouponDoc {
    /// Coupon id.
    pub id: Uuid,
    /// The template it was claimed from.
    pub template_id: Uuid,
    /// Its owner.
    pub user_id: String,
    /// The idempotency key (`request_id`) of the claim that created it.
    pub claim_request_id: String,
    /// `issued`, `locked`, `used`, `expired` or `revoked`.
    #[schema(schema_with = coupon_status_schema)]
    pub status: String,
    /// The order holding it, while locked or used.
    pub order_id: Option<String>,
    /// When its checkout lock lapses, while locked.
    pub locked_until: Option<OffsetDateTime>,
    /// When it was claimed.
    pub claimed_at: OffsetDateTime,
    /// Start of validity.
    pub valid_from: OffsetDateTime,
    /// End of validity.
    pub valid_until: OffsetDateTime,
    /// When it was redeemed, while used.
    pub used_at: Option<OffsetDateTime>,
}

/// The auditor's verdict on one template (invariants I1–I5).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = AuditReport)]
pub struct AuditDoc {
    /// True when no invariant is violated.
    pub ok: bool,
    /// The template audited.
    pub template_id: Uuid,
    /// Its total stock.
    pub total_stock: i64,
    /// Redis stock (`null`: keys absent, rebuilt on the next claim).
    pub redis_stock: Option<i64>,
    /// Coupons counting against stock in Postgres.
    pub counted: i64,
    /// Claim intents granted in Redis and not yet in Postgres.
    pub pending: i64,
    /// Refunds to stock committed and not yet applied to Redis.
    pub outbox_unapplied: i64,
    /// Everything wrong; empty means the template is sound.
    pub violations: Vec<ViolationDoc>,
}

/// One broken invariant.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = Violation)]
pub struct ViolationDoc {
    /// Which invariant: `I1` … `I5`.
    #[schema(pattern = "^I[1-5]$")]
    pub invariant: String,
    /// What was seen.
    pub detail: String,
}

/// What one reconciliation pass did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = ReconcileReport)]
pub struct ReconcileDoc {
    /// Templates looked at.
    pub templates: u64,
    /// Pending intents written to Postgres (or found already written).
    pub pending_persisted: u64,
    /// Pending intents dropped.
    pub pending_dropped: u64,
    /// Outbox rows applied to Redis.
    pub outbox_applied: u64,
    /// Templates whose Redis stock disagrees with Postgres after the pass.
    pub drift: Vec<DriftDoc>,
}

/// A disagreement between Redis stock and what Postgres implies.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = TemplateDrift)]
pub struct DriftDoc {
    /// The template.
    pub template_id: Uuid,
    /// Stock in Redis (`null`: not initialised).
    pub redis_stock: Option<i64>,
    /// total − counted − still-pending intents.
    pub expected_stock: i64,
}
