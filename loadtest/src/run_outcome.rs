//! How a run ended (PASS or FAIL, and why) and its exit code (documented in `--help` and
//! loadtest/README.md).

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunOutcome {
    /// Every invariant held, thresholds passed, no regression.
    Pass,
    /// An invariant (I1–I7) was violated.
    InvariantViolated,
    /// A Goose threshold failed or a metric regressed against the baseline.
    ThresholdOrRegression,
    /// A `--nemesis` step could not be carried out: the run did not test what it was asked
    /// to, so it cannot pass.
    FaultNotInjected,
}

/// Exit code of a setup or infrastructure error.
pub(crate) const EXIT_SETUP: u8 = 3;

impl RunOutcome {
    /// The process exit code: 0, 1, 2, or 3 ([`EXIT_SETUP`], as a setup error) when a fault
    /// could not be injected.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Self::Pass => 0,
            Self::InvariantViolated => 1,
            Self::ThresholdOrRegression => 2,
            Self::FaultNotInjected => EXIT_SETUP,
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

    /// The verdict once the run's faults are known: a fault that did not happen fails the
    /// run (exit 3) unless an invariant already did.
    pub(crate) fn given_faults(self, all_injected: bool) -> Self {
        if all_injected || self == Self::InvariantViolated {
            self
        } else {
            Self::FaultNotInjected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invariants_dominate() {
        assert_eq!(RunOutcome::decide(false, false, false).exit_code(), 1);
        assert_eq!(RunOutcome::decide(true, false, true).exit_code(), 2);
        assert_eq!(RunOutcome::decide(true, true, false).exit_code(), 2);
        assert_eq!(RunOutcome::decide(true, true, true).exit_code(), 0);
    }

    #[test]
    fn a_fault_that_did_not_happen_fails_the_run_unless_an_invariant_did() {
        let pass = RunOutcome::decide(true, true, true);
        assert_eq!(pass.given_faults(true), RunOutcome::Pass);
        assert_eq!(pass.given_faults(false).exit_code(), EXIT_SETUP);
        assert_eq!(pass.given_faults(false).label(), "FAIL");
        let slow = RunOutcome::decide(true, false, true);
        assert_eq!(slow.given_faults(false), RunOutcome::FaultNotInjected);
        let violated = RunOutcome::decide(false, true, true);
        assert_eq!(violated.given_faults(false), RunOutcome::InvariantViolated);
    }
}
