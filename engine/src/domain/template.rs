//! Coupon templates: what can be claimed, how much of it, by whom and when.

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use super::{discount::Discount, ids::TemplateId};
use crate::error::{EngineError, EngineResult};

/// What a refund does with the coupon (docs/ARCHITECTURE.md, "Redeem and refund"). Never
/// both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundPolicy {
    /// The coupon goes back to the user as `issued`; stock is untouched.
    ReturnToUser,
    /// The coupon is `revoked` and its stock (and the user's quota) returns to the pool.
    ReturnToStock,
}

impl RefundPolicy {
    /// The value stored in Postgres.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReturnToUser => "return_to_user",
            Self::ReturnToStock => "return_to_stock",
        }
    }

    /// Parses the value stored in Postgres.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "return_to_user" => Some(Self::ReturnToUser),
            "return_to_stock" => Some(Self::ReturnToStock),
            _ => None,
        }
    }
}

/// Whether a template can be claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateStatus {
    /// Claims are accepted (inside the claim window).
    Active,
    /// Claims are refused for now.
    Paused,
    /// Claims are refused for good.
    Ended,
}

impl TemplateStatus {
    /// The value stored in Postgres.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Ended => "ended",
        }
    }

    /// Parses the value stored in Postgres.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "paused" => Some(Self::Paused),
            "ended" => Some(Self::Ended),
            _ => None,
        }
    }
}

/// Input for creating a template; validated before anything is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTemplate {
    /// Display name.
    pub name: String,
    /// Coupons that may ever count against stock.
    pub total_stock: i64,
    /// Coupons one user may hold (issued, used or expired).
    pub per_user_limit: i32,
    /// The discount rule.
    pub discount: Discount,
    /// Absolute validity start (defaults to the claim time).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub valid_from: Option<OffsetDateTime>,
    /// Absolute validity end; exactly one of this and `valid_days`.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub valid_until: Option<OffsetDateTime>,
    /// Validity in days counted from the claim; exactly one of this and `valid_until`.
    #[serde(default)]
    pub valid_days: Option<i32>,
    /// Claims before this are refused.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub claim_starts_at: Option<OffsetDateTime>,
    /// Claims after this are refused.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub claim_ends_at: Option<OffsetDateTime>,
    /// What a refund does.
    pub refund_policy: RefundPolicy,
    /// With `return_to_user`: extend validity by the time the coupon was held by the order.
    #[serde(default)]
    pub extend_validity_on_refund: bool,
}

/// Largest stock a template may have (keeps counts far from any overflow).
pub const MAX_STOCK: i64 = 1_000_000_000;
/// Largest per-user limit.
pub const MAX_PER_USER_LIMIT: i32 = 10_000;

impl NewTemplate {
    /// A template with `stock`, `limit` per user, a fixed discount and 30 days of validity.
    pub fn simple(name: &str, stock: i64, limit: i32, policy: RefundPolicy) -> Self {
        Self {
            name: name.to_owned(),
            total_stock: stock,
            per_user_limit: limit,
            discount: Discount::fixed(500),
            valid_from: None,
            valid_until: None,
            valid_days: Some(30),
            claim_starts_at: None,
            claim_ends_at: None,
            refund_policy: policy,
            extend_validity_on_refund: false,
        }
    }

    /// Checks every field; a template that passes can be stored as is.
    pub fn validate(&self) -> EngineResult<()> {
        let name = self.name.trim();
        if name.is_empty() || self.name.len() > 200 {
            return Err(EngineError::invalid("name must be 1 to 200 characters"));
        }
        if !(1..=MAX_STOCK).contains(&self.total_stock) {
            return Err(EngineError::invalid(format!(
                "total_stock must be between 1 and {MAX_STOCK}"
            )));
        }
        if !(1..=MAX_PER_USER_LIMIT).contains(&self.per_user_limit) {
            return Err(EngineError::invalid(format!(
                "per_user_limit must be between 1 and {MAX_PER_USER_LIMIT}"
            )));
        }
        self.discount.validate()?;
        match (self.valid_until, self.valid_days) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(EngineError::invalid(
                    "exactly one of valid_until and valid_days must be given",
                ));
            }
            (None, Some(days)) if !(1..=3650).contains(&days) => {
                return Err(EngineError::invalid(
                    "valid_days must be between 1 and 3650",
                ));
            }
            _ => {}
        }
        if let (Some(from), Some(until)) = (self.valid_from, self.valid_until)
            && from >= until
        {
            return Err(EngineError::invalid(
                "valid_from must be before valid_until",
            ));
        }
        if let (Some(start), Some(end)) = (self.claim_starts_at, self.claim_ends_at)
            && start >= end
        {
            return Err(EngineError::invalid(
                "claim_starts_at must be before claim_ends_at",
            ));
        }
        if self.extend_validity_on_refund && self.refund_policy == RefundPolicy::ReturnToStock {
            return Err(EngineError::invalid(
                "extend_validity_on_refund applies only to refund_policy return_to_user",
            ));
        }
        Ok(())
    }
}

/// A stored template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    /// Template id.
    pub id: TemplateId,
    /// Everything given at creation.
    #[serde(flatten)]
    pub spec: NewTemplate,
    /// Whether claims are accepted.
    pub status: TemplateStatus,
}

impl Template {
    /// Refuses a claim when the template is not active or `now` is outside the claim window.
    pub fn check_claimable(&self, now: OffsetDateTime) -> EngineResult<()> {
        if self.status != TemplateStatus::Active {
            return Err(EngineError::InvalidState(format!(
                "template is {}",
                self.status.as_str()
            )));
        }
        if self.spec.claim_starts_at.is_some_and(|s| now < s) {
            return Err(EngineError::InvalidState(
                "the claim window has not opened".into(),
            ));
        }
        if self.spec.claim_ends_at.is_some_and(|e| now >= e) {
            return Err(EngineError::InvalidState(
                "the claim window has closed".into(),
            ));
        }
        Ok(())
    }

    /// The validity of a coupon claimed at `claimed_at`.
    pub fn coupon_validity(&self, claimed_at: OffsetDateTime) -> (OffsetDateTime, OffsetDateTime) {
        let from = self.spec.valid_from.unwrap_or(claimed_at);
        let until = match (self.spec.valid_until, self.spec.valid_days) {
            (Some(until), _) => until,
            (None, Some(days)) => claimed_at + Duration::days(i64::from(days)),
            (None, None) => claimed_at,
        };
        (from, until.max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_templates_are_rejected() {
        let ok = NewTemplate::simple("t", 10, 1, RefundPolicy::ReturnToUser);
        assert!(ok.validate().is_ok());
        for bad in [
            NewTemplate {
                total_stock: 0,
                ..ok.clone()
            },
            NewTemplate {
                total_stock: -5,
                ..ok.clone()
            },
            NewTemplate {
                per_user_limit: 0,
                ..ok.clone()
            },
            NewTemplate {
                name: " ".into(),
                ..ok.clone()
            },
            NewTemplate {
                valid_days: None,
                ..ok.clone()
            },
            NewTemplate {
                valid_until: Some(OffsetDateTime::now_utc()),
                ..ok.clone()
            },
            NewTemplate {
                refund_policy: RefundPolicy::ReturnToStock,
                extend_validity_on_refund: true,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn validity_counts_from_the_claim() {
        let t = Template {
            id: uuid::Uuid::nil().into(),
            spec: NewTemplate::simple("t", 1, 1, RefundPolicy::ReturnToUser),
            status: TemplateStatus::Active,
        };
        let now = OffsetDateTime::now_utc();
        let (from, until) = t.coupon_validity(now);
        assert_eq!(from, now);
        assert_eq!(until - now, Duration::days(30));
    }
}
