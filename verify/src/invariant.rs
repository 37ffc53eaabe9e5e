//! The invariants the project proves (docs/ARCHITECTURE.md, "Invariants"): one catalog for
//! the auditor (I1–I5 from the stores), the property tests (all nine, from histories) and
//! the load test (I1–I7, from what shoppers were told), so a finding means the same thing
//! wherever it is reported.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One invariant. Serialized as its id (`"I1"`), as histories and reports store it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Invariant {
    /// No oversell.
    I1,
    /// Conservation of stock.
    I2,
    /// Per-user limit.
    I3,
    /// Single use.
    I4,
    /// Legal transitions and ownership.
    I5,
    /// No lost acknowledgement.
    I6,
    /// Idempotency.
    I7,
    /// Linearizability.
    I8,
    /// Liveness.
    I9,
    /// One clock: the claim window.
    I10,
    /// One live order per coupon.
    I11,
    /// Locks end.
    I12,
    /// Nothing to pay below zero.
    I13,
    /// One rebuild per store change.
    I14,
}

impl Invariant {
    /// Every invariant, in order.
    pub const ALL: [Self; 14] = [
        Self::I1,
        Self::I2,
        Self::I3,
        Self::I4,
        Self::I5,
        Self::I6,
        Self::I7,
        Self::I8,
        Self::I9,
        Self::I10,
        Self::I11,
        Self::I12,
        Self::I13,
        Self::I14,
    ];

    /// `I1` … `I14`.
    pub fn id(self) -> &'static str {
        match self {
            Self::I1 => "I1",
            Self::I2 => "I2",
            Self::I3 => "I3",
            Self::I4 => "I4",
            Self::I5 => "I5",
            Self::I6 => "I6",
            Self::I7 => "I7",
            Self::I8 => "I8",
            Self::I9 => "I9",
            Self::I10 => "I10",
            Self::I11 => "I11",
            Self::I12 => "I12",
            Self::I13 => "I13",
            Self::I14 => "I14",
        }
    }

    /// What must hold, in one line.
    pub fn title(self) -> &'static str {
        match self {
            Self::I1 => {
                "No oversell: coupons counting against stock ≤ total stock; Redis stock ≥ 0"
            }
            Self::I2 => "Conservation: Redis stock + counted (+ in flight) = total stock",
            Self::I3 => "Per-user limit held (and equal to Redis' claimed count)",
            Self::I4 => "Single use: at most one live redemption per coupon",
            Self::I5 => "Legal transitions only; nobody acts on another user's coupon",
            Self::I6 => {
                "No lost acknowledgement: every acknowledged effect is in the final state; \
                 nothing unexplained exists"
            }
            Self::I7 => {
                "Idempotency: a retried request (same request id, same order) has no second effect"
            }
            Self::I8 => "Linearizability: the history has a sequential explanation, per template",
            Self::I9 => {
                "Liveness: every operation is answered within the deadline (plus a margin), \
                 faults or not; without faults, a claim with stock and under the limit succeeds"
            }
            Self::I10 => {
                "One clock: no coupon is granted outside its template's claim window by the true clock"
            }
            Self::I11 => {
                "One live order per coupon: no two orders hold a coupon (a live lock or a \
                 redemption) at the same time"
            }
            Self::I12 => {
                "Locks end: a checkout lock is redeemed, released or swept within its TTL plus \
                 the sweep interval"
            }
            Self::I13 => {
                "Nothing below zero to pay: a discount is never negative and never exceeds its order"
            }
            Self::I14 => {
                "One rebuild per store change: a template's Redis state is rebuilt at most once \
                 for each change of store identity, however many servers notice it"
            }
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl std::str::FromStr for Invariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|i| i.id().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("{s:?} is not an invariant (I1 … I14)"))
    }
}

/// One broken invariant, with what was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Which invariant.
    pub invariant: Invariant,
    /// What was seen.
    pub detail: String,
}

impl Finding {
    /// A finding of `invariant`.
    pub fn new(invariant: Invariant, detail: impl Into<String>) -> Self {
        Self {
            invariant,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_json() {
        for i in Invariant::ALL {
            assert_eq!(i.id().parse::<Invariant>(), Ok(i));
            let json = serde_json::to_string(&i).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", i.id()));
        }
        assert!("I15".parse::<Invariant>().is_err());
    }
}
