//! The run's verdict and its exit code (documented in `--help` and loadtest/README.md).

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// Every invariant held, thresholds passed, no regression.
    Pass,
    /// An invariant (I1–I7) was violated.
    InvariantViolated,
    /// A Goose threshold failed or a metric regressed against the baseline.
    ThresholdOrRegression,
}

/// Exit code of a setup or infrastructure error.
pub(crate) const EXIT_SETUP: u8 = 3;

impl Verdict {
    /// The process exit code: 0, 1 or 2 (3 is a setup error, see [`EXIT_SETUP`]).
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Self::Pass => 0,
            Self::InvariantViolated => 1,
            Self::ThresholdOrRegression => 2,
        }
    }

    /// PASS or FAIL.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            _ => "FAIL",
        }
    }

    /// Invariant violations dominate thresholds and regressions.
    pub(crate) fn decide(invariants_ok: bool, thresholds_ok: bool, no_regression: bool) -> Self {
        if !invariants_ok {
            Self::InvariantViolated
        } else if !(thresholds_ok && no_regression) {
            Self::ThresholdOrRegression
        } else {
            Self::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invariants_dominate() {
        assert_eq!(Verdict::decide(false, false, false).exit_code(), 1);
        assert_eq!(Verdict::decide(true, false, true).exit_code(), 2);
        assert_eq!(Verdict::decide(true, true, false).exit_code(), 2);
        assert_eq!(Verdict::decide(true, true, true).exit_code(), 0);
    }
}
