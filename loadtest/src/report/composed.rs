//! The run's checks as composed results (`coupon_verify::validity`), the shape a property
//! case and `check-history` report too: each invariant a named checker, valid when it held,
//! invalid with its violations when not; a run recorded without its audit (`--no-audit`)
//! is unknown — not a pass.

use coupon_verify::{CheckerResult, Composed, Finding, Invariant, Validity};

use super::Report;

/// `r`'s invariants, composed.
pub(crate) fn composed(r: &Report) -> Composed {
    let mut results: Vec<CheckerResult> = r
        .invariants
        .iter()
        .map(|i| {
            let invariant = Invariant::ALL.into_iter().find(|v| v.id() == i.id);
            CheckerResult {
                checker: i.id.clone(),
                validity: if i.passed {
                    Validity::Valid
                } else {
                    Validity::Invalid
                },
                findings: match invariant {
                    Some(v) if !i.passed => i
                        .details
                        .iter()
                        .map(|d| Finding::new(v, d.clone()))
                        .collect(),
                    _ => Vec::new(),
                },
                undecided: None,
            }
        })
        .collect();
    if !r.audited {
        results.push(CheckerResult::unknown(
            "audit",
            "recorded only (--no-audit): nothing was checked",
        ));
    }
    Composed::of(results)
}

/// One line for the report's head: the merge, and the checkers that made it.
pub(crate) fn summary(c: &Composed) -> String {
    let named = |v: Validity| -> Vec<&str> {
        c.results
            .iter()
            .filter(|r| r.validity == v)
            .map(|r| r.checker.as_str())
            .collect()
    };
    let mut parts = Vec::new();
    for v in [Validity::Invalid, Validity::Unknown, Validity::Valid] {
        let names = named(v);
        if !names.is_empty() {
            parts.push(format!("{v}: {}", names.join(", ")));
        }
    }
    format!("{} ({})", c.validity, parts.join("; "))
}
