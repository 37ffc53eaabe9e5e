//! One HTTP reply a simulated shopper saw, and what its request was for: the wire record
//! the acknowledgement record ([`crate::acks`]) keeps and the run's tally ([`crate::tally`])
//! counts. It is not a second history: the checks turn every kept reply into the
//! verification core's operation (`crate::checks::history`), and only the core judges.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a request was for; its `name` is the stable request name in Goose and the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RequestKind {
    /// `POST /v1/templates/{id}/claims`.
    Claim,
    /// `POST /v1/coupons/{id}/redeem` by the owner.
    Redeem,
    /// `POST /v1/coupons/{id}/refund` by the owner.
    Refund,
    /// `GET /v1/users/me/coupons`.
    MyCoupons,
    /// A redeem of another user's coupon (must be refused with 403).
    RedeemCrossUser,
    /// A refund of another user's coupon (must be refused with 403).
    RefundCrossUser,
    /// `POST /v1/coupons/{id}/lock`: an order placed with the coupon.
    Lock,
    /// `POST /v1/coupons/{id}/release`: the order cancelled.
    Release,
    /// A lock of another user's coupon (must be refused with 403).
    LockCrossUser,
}

impl RequestKind {
    /// The request name in Goose metrics and in the reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Redeem => "redeem",
            Self::Refund => "refund",
            Self::MyCoupons => "my_coupons",
            Self::RedeemCrossUser => "redeem_cross_user",
            Self::RefundCrossUser => "refund_cross_user",
            Self::Lock => "lock",
            Self::Release => "release",
            Self::LockCrossUser => "lock_cross_user",
        }
    }

    /// Whether the request acts on a coupon its sender does not own.
    pub(crate) fn cross_user(self) -> bool {
        matches!(
            self,
            Self::RedeemCrossUser | Self::RefundCrossUser | Self::LockCrossUser
        )
    }
}

/// How a request ended, as the client can know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyClass {
    /// 2xx: the effect happened (acknowledged).
    Ok,
    /// A definitive refusal (4xx other than 408/429): no effect.
    Refused,
    /// 429 busy: refused before doing anything, worth retrying.
    Busy,
    /// Timeout, transport error or 5xx: the effect may or may not have happened.
    Unknown,
}

/// One reply a user saw (a line of `acks.jsonl`, where absent fields are `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// The request.
    pub op: RequestKind,
    /// Index of the Goose user that sent it.
    pub goose_user: usize,
    /// The shopper (user id) whose token was used.
    pub user: Arc<str>,
    /// The template involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Uuid>,
    /// The coupon involved (for claims: the coupon answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coupon: Option<Uuid>,
    /// Claim idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Arc<str>>,
    /// Order of a redeem or refund.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<Arc<str>>,
    /// 0 for the first try, then retries with the same ids.
    pub attempt: u32,
    /// A deliberate repeat of an acknowledged request (same ids).
    pub duplicate: bool,
    /// Start, microseconds since the load began.
    pub start_us: u64,
    /// Latency including the body, microseconds.
    pub latency_us: u64,
    /// HTTP status; `None` for a timeout or transport error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Error code of a refusal (`stock_empty`, `not_owner`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Coupon status a refund answered (`issued` or `revoked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refund_status: Option<String>,
    /// Transport error text, for timeouts and the like.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Index of the server the request went to (0 with one server).
    #[serde(default)]
    pub server: usize,
}

impl Reply {
    /// How the request ended.
    pub(crate) fn class(&self) -> ReplyClass {
        match self.status {
            None => ReplyClass::Unknown,
            Some(s) if (200..300).contains(&s) => ReplyClass::Ok,
            Some(429) => ReplyClass::Busy,
            Some(408) => ReplyClass::Unknown,
            Some(s) if s >= 500 => ReplyClass::Unknown,
            Some(_) => ReplyClass::Refused,
        }
    }

    /// End, microseconds since the load began.
    pub(crate) fn end_us(&self) -> u64 {
        self.start_us + self.latency_us
    }

    /// Whether a post-run check compares this answer with anything. A claim's refused first
    /// attempt does not: a definitive refusal is never retried and only acknowledged
    /// requests are deliberately repeated, so no other answer shares its request id. It is
    /// also most of a flash sale (the flood after the stock is gone).
    pub(crate) fn needed_by_checks(&self) -> bool {
        !(self.op == RequestKind::Claim
            && self.attempt == 0
            && !self.duplicate
            && self.class() == ReplyClass::Refused)
    }
}
