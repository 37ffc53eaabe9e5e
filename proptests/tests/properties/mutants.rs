//! Every defect mutant (docs/ARCHITECTURE.md, "Mutants") must be killed by the property tests
//! within a bounded number of cases, and the correct engine must survive the same runs (issue
//! "Mutants").
//! `reports/mutation-score.md` is the full table (`mutation-score` binary).

use coupon_engine::Variant;
use coupon_proptests::mutation::{caught_by_what_it_issued, score, selected_variants};

/// Generated cases a mutant may survive before the test fails.
const CASE_BOUND: u32 = 40;
/// Shrinking steps per kill (kept small for CI; the binary shrinks further).
const SHRINK: u32 = 8;

#[test]
fn every_mutant_is_killed_and_the_correct_engine_survives() {
    let _serial = super::one_at_a_time();
    let mut failures = Vec::new();
    for v in selected_variants() {
        let row = score(v, CASE_BOUND, SHRINK);
        eprintln!(
            "{:8} killed={} by {:?} after {:?} cases ({:.1}s) history={:?}",
            row.variant, row.killed, row.invariants, row.cases_to_kill, row.seconds, row.history
        );
        if let Some(e) = &row.error {
            failures.push(format!("{}: harness error {e}", row.variant));
        } else if v == Variant::Correct && row.killed {
            failures.push(format!(
                "correct engine failed: {:?} (see {:?})",
                row.invariants, row.history
            ));
        } else if v != Variant::Correct && !row.killed {
            failures.push(format!("{} survived {CASE_BOUND} cases", row.variant));
        } else if v != Variant::Correct && !has_counterexample_page(row.history.as_deref()) {
            failures.push(format!(
                "{}: no counterexample page beside {:?}",
                row.variant, row.history
            ));
        } else if v == Variant::D8 && !caught_by_what_it_issued(&row.invariants) {
            failures.push(format!(
                "D8 was caught by {:?}, not by what it issued (I1, I3)",
                row.invariants
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A killed mutant's minimal case is also drawn: `<history>.html`, an offline page with
/// the case's timeline and the invariants it broke.
fn has_counterexample_page(history: Option<&std::path::Path>) -> bool {
    let Some(page) = history.map(|h| h.with_extension("html")) else {
        return false;
    };
    // The table names it from the workspace's root.
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .join(page);
    std::fs::read_to_string(page).is_ok_and(|html| {
        html.contains("<svg") && html.contains("Invariants violated") && !html.contains("<script")
    })
}
