//! Operations a client sends and the results it sees, in the vocabulary of the model.
//!
//! Generated histories name templates by their index in the scenario and coupons by the claim
//! that created them ([`CouponRef`]), so a scenario can be written — and shrunk — before any
//! real id exists. The runner maps these to engine ids and back.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What happens to a coupon when its redemption is refunded (docs/ARCHITECTURE.md, "Redeem
/// and refund").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// The coupon goes back to its owner (`used → issued`).
    ReturnToUser,
    /// The coupon is revoked and its stock and quota go back to the template (`used → revoked`).
    ReturnToStock,
}

/// The part of a template the model needs: stock, per-user limit and refund policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TemplateSpec {
    /// Index of the template in the scenario (not the engine's uuid).
    pub id: u32,
    /// Initial stock (`total_stock`).
    pub stock: i64,
    /// How many coupons one user may hold against the limit.
    pub per_user_limit: i64,
    /// What a refund does.
    pub policy: Policy,
}

/// A coupon named by the claim that created it: its template and the claim's request id.
///
/// The engine's unique key (template_id, claim_request_id) makes this a stable name that
/// generated histories can use before the coupon's uuid is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CouponRef {
    /// Template index.
    pub template: u32,
    /// Request id of the claim that created the coupon.
    pub request_id: String,
}

/// One client request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Claim one coupon of `template`; `request_id` is the idempotency key.
    Claim {
        /// Template index.
        template: u32,
        /// The claiming user.
        user: String,
        /// Idempotency key of the claim.
        request_id: String,
    },
    /// Redeem `coupon` for `order_id`.
    Redeem {
        /// The coupon to use.
        coupon: CouponRef,
        /// The user acting (must own the coupon).
        user: String,
        /// The order the coupon is used for.
        order_id: String,
    },
    /// Refund the redemption of `coupon` by `order_id`.
    Refund {
        /// The coupon whose redemption is undone.
        coupon: CouponRef,
        /// The user acting (must own the coupon).
        user: String,
        /// The order being refunded.
        order_id: String,
    },
    /// Checkout: lock `coupon` for `order_id` (an order placed; paid by a redeem with the
    /// same order). The lock's TTL outlasts every case, so it never lapses here.
    Lock {
        /// The coupon to lock.
        coupon: CouponRef,
        /// The user acting (must own the coupon).
        user: String,
        /// The order being placed.
        order_id: String,
    },
    /// Checkout: release the lock `order_id` holds on `coupon` (the order was cancelled).
    Release {
        /// The coupon to release.
        coupon: CouponRef,
        /// The user acting (must own the coupon).
        user: String,
        /// The cancelled order.
        order_id: String,
    },
}

impl Op {
    /// The template this operation touches; histories are partitioned by it.
    pub fn template(&self) -> u32 {
        match self {
            Op::Claim { template, .. } => *template,
            Op::Redeem { coupon, .. }
            | Op::Refund { coupon, .. }
            | Op::Lock { coupon, .. }
            | Op::Release { coupon, .. } => coupon.template,
        }
    }

    /// The coupon a redeem, refund, lock or release acts on (`None` for a claim).
    pub fn coupon(&self) -> Option<&CouponRef> {
        match self {
            Op::Claim { .. } => None,
            Op::Redeem { coupon, .. }
            | Op::Refund { coupon, .. }
            | Op::Lock { coupon, .. }
            | Op::Release { coupon, .. } => Some(coupon),
        }
    }

    /// The order a redeem, refund, lock or release names (`None` for a claim).
    pub fn order(&self) -> Option<&str> {
        match self {
            Op::Claim { .. } => None,
            Op::Redeem { order_id, .. }
            | Op::Refund { order_id, .. }
            | Op::Lock { order_id, .. }
            | Op::Release { order_id, .. } => Some(order_id),
        }
    }

    /// The user sending the operation.
    pub fn user(&self) -> &str {
        match self {
            Op::Claim { user, .. }
            | Op::Redeem { user, .. }
            | Op::Refund { user, .. }
            | Op::Lock { user, .. }
            | Op::Release { user, .. } => user,
        }
    }
}

/// Why the engine refused an operation; the names match the HTTP error codes
/// (docs/ARCHITECTURE.md, "HTTP API").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The template is sold out.
    StockEmpty,
    /// The user holds as many coupons as allowed.
    UserLimit,
    /// Template or coupon unknown.
    NotFound,
    /// The coupon belongs to another user.
    NotOwner,
    /// The coupon is used by another order.
    AlreadyUsed,
    /// The operation is illegal in the coupon's state.
    InvalidState,
    /// Malformed input, or a request id another user already claimed with.
    InvalidRequest,
    /// The coupon's redeem lock was held; nothing happened.
    Busy,
    /// The coupon is locked by another order's checkout.
    Locked,
}

impl Refusal {
    /// Every refusal, in declaration order.
    pub const ALL: [Refusal; 9] = [
        Refusal::StockEmpty,
        Refusal::UserLimit,
        Refusal::NotFound,
        Refusal::NotOwner,
        Refusal::AlreadyUsed,
        Refusal::InvalidState,
        Refusal::InvalidRequest,
        Refusal::Busy,
        Refusal::Locked,
    ];

    /// The stable error code of this refusal (`EngineError::code`, HTTP `error.code`).
    pub fn code(self) -> &'static str {
        match self {
            Refusal::StockEmpty => "stock_empty",
            Refusal::UserLimit => "user_limit",
            Refusal::NotFound => "not_found",
            Refusal::NotOwner => "not_owner",
            Refusal::AlreadyUsed => "already_used",
            Refusal::InvalidState => "invalid_state",
            Refusal::InvalidRequest => "invalid_request",
            Refusal::Busy => "busy",
            Refusal::Locked => "locked",
        }
    }

    /// The refusal with this error code; `None` for codes the model does not know
    /// (e.g. `expired`, `unavailable`), which the runner must not record as refusals.
    pub fn from_code(code: &str) -> Option<Refusal> {
        Refusal::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// What an operation answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// The claim was granted. A retry with the same request id answers with the same coupon,
    /// so the coupon is always named by the claim's own (template, request id).
    Claimed {
        /// The coupon the user holds.
        coupon: CouponRef,
    },
    /// The coupon is used by the order (first time or idempotent repeat).
    Redeemed,
    /// The redemption is undone (first time or idempotent repeat).
    Refunded,
    /// The coupon is locked for the order (first time or idempotent repeat).
    Locked,
    /// The order holds no lock on the coupon any more (released now, or held none).
    Released,
    /// Refused; a refusal never has an effect.
    Refused(Refusal),
}

impl OpResult {
    /// The refusal, if this result is one.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            OpResult::Refused(r) => Some(*r),
            _ => None,
        }
    }
}

impl fmt::Display for CouponRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}/{}", self.template, self.request_id)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Claim {
                template,
                user,
                request_id,
            } => write!(f, "claim t{template} by {user} req {request_id}"),
            Op::Redeem {
                coupon,
                user,
                order_id,
            } => write!(f, "redeem {coupon} by {user} order {order_id}"),
            Op::Refund {
                coupon,
                user,
                order_id,
            } => write!(f, "refund {coupon} by {user} order {order_id}"),
            Op::Lock {
                coupon,
                user,
                order_id,
            } => write!(f, "lock {coupon} by {user} order {order_id}"),
            Op::Release {
                coupon,
                user,
                order_id,
            } => write!(f, "release {coupon} by {user} order {order_id}"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl fmt::Display for OpResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpResult::Claimed { coupon } => write!(f, "claimed {coupon}"),
            OpResult::Redeemed => f.write_str("redeemed"),
            OpResult::Refunded => f.write_str("refunded"),
            OpResult::Locked => f.write_str("locked"),
            OpResult::Released => f.write_str("released"),
            OpResult::Refused(r) => write!(f, "refused {r}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn coupon() -> CouponRef {
        CouponRef {
            template: 2,
            request_id: "r1".into(),
        }
    }

    #[test]
    fn template_of_each_op() {
        let claim = Op::Claim {
            template: 7,
            user: "a".into(),
            request_id: "r".into(),
        };
        let redeem = Op::Redeem {
            coupon: coupon(),
            user: "a".into(),
            order_id: "o".into(),
        };
        assert_eq!(claim.template(), 7);
        assert_eq!(redeem.template(), 2);
        assert_eq!(redeem.coupon(), Some(&coupon()));
        assert_eq!(claim.coupon(), None);
    }

    #[test]
    fn refusal_codes_round_trip() {
        for r in Refusal::ALL {
            assert_eq!(Refusal::from_code(r.code()), Some(r));
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.code())
            );
        }
        assert_eq!(Refusal::from_code("expired"), None);
    }

    #[test]
    fn ops_and_results_round_trip_through_json() {
        let op = Op::Refund {
            coupon: coupon(),
            user: "u".into(),
            order_id: "o".into(),
        };
        let json = serde_json::to_string(&op).unwrap();
        assert_eq!(serde_json::from_str::<Op>(&json).unwrap(), op);
        for result in [
            OpResult::Claimed { coupon: coupon() },
            OpResult::Redeemed,
            OpResult::Refused(Refusal::Busy),
        ] {
            let json = serde_json::to_string(&result).unwrap();
            assert_eq!(serde_json::from_str::<OpResult>(&json).unwrap(), result);
        }
    }
}

/// Short constructors for tests, all on template 0.
pub mod fixtures {
    use super::{CouponRef, Op};

    /// The coupon of claim `req` on template 0.
    pub fn coupon(req: &str) -> CouponRef {
        CouponRef {
            template: 0,
            request_id: req.into(),
        }
    }

    /// A claim on template 0.
    pub fn claim(user: &str, req: &str) -> Op {
        Op::Claim {
            template: 0,
            user: user.into(),
            request_id: req.into(),
        }
    }

    /// A redeem of the coupon of claim `req`.
    pub fn redeem(req: &str, user: &str, order: &str) -> Op {
        Op::Redeem {
            coupon: coupon(req),
            user: user.into(),
            order_id: order.into(),
        }
    }

    /// A refund of the coupon of claim `req`.
    pub fn refund(req: &str, user: &str, order: &str) -> Op {
        Op::Refund {
            coupon: coupon(req),
            user: user.into(),
            order_id: order.into(),
        }
    }

    /// A checkout lock of the coupon of claim `req`.
    pub fn lock(req: &str, user: &str, order: &str) -> Op {
        Op::Lock {
            coupon: coupon(req),
            user: user.into(),
            order_id: order.into(),
        }
    }

    /// A release of the coupon of claim `req`.
    pub fn release(req: &str, user: &str, order: &str) -> Op {
        Op::Release {
            coupon: coupon(req),
            user: user.into(),
            order_id: order.into(),
        }
    }
}
