//! Discount rules: fixed, percent (optionally capped) and threshold (docs/ARCHITECTURE.md,
//! "Coupon states and discounts").

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, EngineResult};

/// How a coupon reduces an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscountKind {
    /// A fixed amount off.
    Fixed,
    /// A percentage off, optionally capped by `max_discount`.
    Percent,
    /// A fixed amount off once the order reaches `min_order_amount`.
    Threshold,
}

impl DiscountKind {
    /// The value stored in Postgres.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Percent => "percent",
            Self::Threshold => "threshold",
        }
    }

    /// Parses the value stored in Postgres.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "fixed" => Some(Self::Fixed),
            "percent" => Some(Self::Percent),
            "threshold" => Some(Self::Threshold),
            _ => None,
        }
    }
}

/// A template's discount. Amounts are minor units (cents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Discount {
    /// Which rule applies.
    pub kind: DiscountKind,
    /// Amount off (fixed, threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<i64>,
    /// Percent off, 1–100 (percent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<i32>,
    /// Orders below this are refused (required for threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_order_amount: Option<i64>,
    /// Cap on a percent discount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_discount: Option<i64>,
}

impl Discount {
    /// A fixed amount off.
    pub fn fixed(amount: i64) -> Self {
        Self {
            kind: DiscountKind::Fixed,
            amount: Some(amount),
            percent: None,
            min_order_amount: None,
            max_discount: None,
        }
    }

    /// Checks that the fields fit the kind; nothing else is accepted.
    pub fn validate(&self) -> EngineResult<()> {
        let positive = |name: &str, v: Option<i64>| match v {
            Some(x) if x <= 0 => Err(EngineError::invalid(format!("discount.{name} must be > 0"))),
            _ => Ok(()),
        };
        positive("amount", self.amount)?;
        positive("max_discount", self.max_discount)?;
        if matches!(self.min_order_amount, Some(m) if m < 0) {
            return Err(EngineError::invalid(
                "discount.min_order_amount must be >= 0",
            ));
        }
        match self.kind {
            DiscountKind::Fixed | DiscountKind::Threshold => {
                if self.amount.is_none() {
                    return Err(EngineError::invalid(format!(
                        "discount.amount is required for kind {}",
                        self.kind.as_str()
                    )));
                }
                if self.percent.is_some() || self.max_discount.is_some() {
                    return Err(EngineError::invalid(
                        "discount.percent and discount.max_discount apply only to kind percent",
                    ));
                }
                if self.kind == DiscountKind::Threshold && self.min_order_amount.is_none() {
                    return Err(EngineError::invalid(
                        "discount.min_order_amount is required for kind threshold",
                    ));
                }
            }
            DiscountKind::Percent => {
                match self.percent {
                    Some(p) if (1..=100).contains(&p) => {}
                    _ => {
                        return Err(EngineError::invalid(
                            "discount.percent must be between 1 and 100 for kind percent",
                        ));
                    }
                }
                if self.amount.is_some() {
                    return Err(EngineError::invalid(
                        "discount.amount does not apply to kind percent",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The discount for an order of `order_amount`, or the refusal for a too-small order.
    /// Never more than the order itself.
    pub fn compute(&self, order_amount: i64) -> EngineResult<i64> {
        if order_amount < 0 {
            return Err(EngineError::invalid("order_amount must be >= 0"));
        }
        if let Some(min) = self.min_order_amount
            && order_amount < min
        {
            return Err(EngineError::BelowMinAmount {
                amount: order_amount,
                min,
            });
        }
        let raw = match self.kind {
            DiscountKind::Fixed | DiscountKind::Threshold => self.amount.unwrap_or(0),
            DiscountKind::Percent => {
                let pct = i128::from(self.percent.unwrap_or(0));
                let off = (i128::from(order_amount) * pct / 100) as i64;
                self.max_discount.map_or(off, |cap| off.min(cap))
            }
        };
        Ok(raw.min(order_amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(p: i32, cap: Option<i64>) -> Discount {
        Discount {
            kind: DiscountKind::Percent,
            amount: None,
            percent: Some(p),
            min_order_amount: None,
            max_discount: cap,
        }
    }

    #[test]
    fn fixed_never_exceeds_the_order() {
        let d = Discount::fixed(500);
        assert_eq!(d.compute(2000).ok(), Some(500));
        assert_eq!(d.compute(300).ok(), Some(300));
    }

    #[test]
    fn percent_is_floored_and_capped() {
        assert_eq!(percent(15, None).compute(999).ok(), Some(149));
        assert_eq!(percent(50, Some(100)).compute(1000).ok(), Some(100));
        assert_eq!(percent(100, None).compute(i64::MAX).ok(), Some(i64::MAX));
    }

    #[test]
    fn threshold_refuses_small_orders() {
        let d = Discount {
            kind: DiscountKind::Threshold,
            amount: Some(1000),
            percent: None,
            min_order_amount: Some(5000),
            max_discount: None,
        };
        assert!(d.validate().is_ok());
        assert_eq!(d.compute(5000).ok(), Some(1000));
        assert!(matches!(
            d.compute(4999),
            Err(EngineError::BelowMinAmount {
                amount: 4999,
                min: 5000
            })
        ));
    }

    #[test]
    fn mismatched_fields_are_rejected() {
        assert!(percent(0, None).validate().is_err());
        assert!(percent(101, None).validate().is_err());
        let mut d = Discount::fixed(10);
        d.percent = Some(5);
        assert!(d.validate().is_err());
        assert!(Discount::fixed(0).validate().is_err());
        let mut t = Discount::fixed(10);
        t.kind = DiscountKind::Threshold;
        assert!(t.validate().is_err());
    }
}
