//! Claimed coupons and their state machine (docs/ARCHITECTURE.md, "Coupon states and
//! discounts").

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::ids::TemplateId;

/// The status of one claimed coupon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CouponStatus {
    /// Held by the user, redeemable while valid.
    Issued,
    /// Locked by an order at checkout, until it is paid (used), cancelled (issued) or its
    /// lock lapses (issued, by the sweep).
    Locked,
    /// Redeemed by an order.
    Used,
    /// Past validity without being used.
    Expired,
    /// Refunded with `return_to_stock`: its stock went back to the pool.
    Revoked,
}

impl CouponStatus {
    /// The value stored in Postgres.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Locked => "locked",
            Self::Used => "used",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }

    /// Parses the value stored in Postgres.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "issued" => Some(Self::Issued),
            "locked" => Some(Self::Locked),
            "used" => Some(Self::Used),
            "expired" => Some(Self::Expired),
            "revoked" => Some(Self::Revoked),
            _ => None,
        }
    }

    /// Whether a coupon in this status counts against stock and the per-user limit.
    pub fn counts_against_stock(self) -> bool {
        !matches!(self, Self::Revoked)
    }

    /// The only legal transitions: issued→used, used→issued, used→revoked, issued→expired,
    /// and checkout's issued→locked, locked→used (paid), locked→issued (cancelled, lapsed).
    pub fn can_become(self, next: Self) -> bool {
        matches!(
            (self, next),
            (Self::Issued, Self::Used)
                | (Self::Issued, Self::Locked)
                | (Self::Locked, Self::Used)
                | (Self::Locked, Self::Issued)
                | (Self::Used, Self::Issued)
                | (Self::Used, Self::Revoked)
                | (Self::Issued, Self::Expired)
        )
    }
}

/// One claimed coupon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coupon {
    /// Coupon id.
    pub id: Uuid,
    /// The template it was claimed from.
    pub template_id: TemplateId,
    /// Its owner.
    pub user_id: String,
    /// The idempotency key of the claim that created it: with the template, the coupon's
    /// name in histories (a coupon a client never saw granted is still named by it).
    pub claim_request_id: String,
    /// Where it is in its life.
    pub status: CouponStatus,
    /// The order holding it, while locked or used.
    pub order_id: Option<String>,
    /// When its checkout lock lapses, while locked.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub locked_until: Option<OffsetDateTime>,
    /// When it was claimed.
    #[serde(with = "time::serde::rfc3339")]
    pub claimed_at: OffsetDateTime,
    /// Start of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub valid_from: OffsetDateTime,
    /// End of validity.
    #[serde(with = "time::serde::rfc3339")]
    pub valid_until: OffsetDateTime,
    /// When it was redeemed, while used.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub used_at: Option<OffsetDateTime>,
}

#[cfg(test)]
mod tests {
    use super::CouponStatus::*;

    #[test]
    fn only_the_seven_transitions_are_legal() {
        let all = [Issued, Locked, Used, Expired, Revoked];
        let legal: Vec<_> = all
            .iter()
            .flat_map(|a| all.iter().map(move |b| (*a, *b)))
            .filter(|(a, b)| a.can_become(*b))
            .collect();
        assert_eq!(
            legal,
            vec![
                (Issued, Locked),
                (Issued, Used),
                (Issued, Expired),
                (Locked, Issued),
                (Locked, Used),
                (Used, Issued),
                (Used, Revoked)
            ]
        );
    }
}
