//! Checker results composed as Jepsen's `checker/compose` does. Each named checker says
//! valid, invalid or unknown, with its evidence; a run's validity is their merge — invalid
//! over unknown over valid. A checker that errs or runs out of budget is unknown: reported,
//! never a pass, and never a violation it did not find.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::invariant::Finding;

/// What a checker (or a whole run) concludes. Ordered so that the merge is the maximum.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    /// Everything it looked at holds.
    #[default]
    Valid,
    /// It could not decide (an error, a budget spent): not a pass, not a violation.
    Unknown,
    /// It found a violation.
    Invalid,
}

impl Validity {
    /// Both together: invalid if either is, else unknown if either is, else valid.
    #[must_use]
    pub fn merge(self, other: Self) -> Self {
        self.max(other)
    }

    /// The result's name in reports (`valid`, `unknown`, `invalid`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Unknown => "unknown",
            Self::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one checker concluded, before it is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// It decided: these violations (none: valid).
    Decided(Vec<Finding>),
    /// It could not decide, and why.
    Undecided(String),
}

impl From<Vec<Finding>> for Judgement {
    fn from(findings: Vec<Finding>) -> Self {
        Self::Decided(findings)
    }
}

/// One named checker's result and its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckerResult {
    /// The checker's name.
    pub checker: String,
    /// What it concluded.
    pub validity: Validity,
    /// The violations it found (invalid only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Why it could not decide (unknown only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecided: Option<String>,
}

impl CheckerResult {
    /// The result of `checker`, whose run ended in `outcome`: an error is unknown.
    pub fn judge<E: fmt::Display>(checker: &str, outcome: Result<Judgement, E>) -> Self {
        match outcome {
            Ok(Judgement::Decided(findings)) => Self {
                checker: checker.into(),
                validity: if findings.is_empty() {
                    Validity::Valid
                } else {
                    Validity::Invalid
                },
                findings,
                undecided: None,
            },
            Ok(Judgement::Undecided(why)) => Self::unknown(checker, why),
            Err(e) => Self::unknown(checker, format!("the checker failed: {e}")),
        }
    }

    /// A checker that could not decide.
    pub fn unknown(checker: &str, why: impl Into<String>) -> Self {
        Self {
            checker: checker.into(),
            validity: Validity::Unknown,
            findings: Vec::new(),
            undecided: Some(why.into()),
        }
    }
}

/// Every checker's result and their merge.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Composed {
    /// The merge of every result (valid when there is none).
    pub validity: Validity,
    /// Each checker's, in the order they ran.
    pub results: Vec<CheckerResult>,
}

impl Composed {
    /// The results, merged.
    pub fn of(results: Vec<CheckerResult>) -> Self {
        let validity = results
            .iter()
            .map(|r| r.validity)
            .fold(Validity::Valid, Validity::merge);
        Self { validity, results }
    }

    /// Every violation, checker by checker.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.results.iter().flat_map(|r| &r.findings)
    }

    /// `checker: why` for each checker that could not decide.
    pub fn undecided(&self) -> Vec<String> {
        self.results
            .iter()
            .filter_map(|r| {
                r.undecided
                    .as_ref()
                    .map(|why| format!("{}: {why}", r.checker))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariant::Invariant;

    fn finding() -> Finding {
        Finding::new(Invariant::I1, "oversold by 1")
    }

    #[test]
    fn invalid_dominates_unknown_which_dominates_valid() {
        use Validity::{Invalid, Unknown, Valid};
        assert_eq!(Valid.merge(Valid), Valid);
        assert_eq!(Valid.merge(Unknown), Unknown);
        assert_eq!(Unknown.merge(Invalid), Invalid);
        assert_eq!(Invalid.merge(Valid), Invalid);
    }

    #[test]
    fn a_checker_that_errs_is_unknown_never_a_pass_nor_a_violation() {
        let crashed = CheckerResult::judge("auditor", Err::<Judgement, _>("connection reset"));
        assert_eq!(crashed.validity, Validity::Unknown);
        assert!(crashed.findings.is_empty());
        let all = Composed::of(vec![
            CheckerResult::judge("acks", Ok::<_, String>(Vec::new().into())),
            crashed,
        ]);
        assert_eq!(all.validity, Validity::Unknown);
        assert_eq!(
            all.undecided(),
            vec!["auditor: the checker failed: connection reset"]
        );
    }

    #[test]
    fn findings_make_a_checker_invalid_and_the_run_with_it() {
        let all = Composed::of(vec![
            CheckerResult::unknown("linearizability", "time budget spent"),
            CheckerResult::judge("auditor", Ok::<_, String>(vec![finding()].into())),
        ]);
        assert_eq!(all.validity, Validity::Invalid);
        assert_eq!(all.findings().count(), 1);
        assert_eq!(Composed::of(Vec::new()).validity, Validity::Valid);
    }
}
