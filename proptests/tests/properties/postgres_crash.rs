//! Postgres crashes (each case on a Postgres of its own, restarted through crash recovery
//! after an immediate shutdown). Claim batches commit synchronously and are answered from
//! that commit, so in sync mode the correct engine holds I1–I7 and I9 through the crash;
//! mutant D9, which commits its batches without waiting for the WAL flush and answers at
//! once, loses acknowledged claims (I6).

use coupon_engine::Variant;
use coupon_proptests::{
    mutation::postgres_crash,
    property::{PropertyConfig, PropertyOutcome, check_with},
    run::RunConfig,
    scenario::scenarios,
};

use super::{assert_passed, cases, report};

/// Cases D9 may survive before the test fails.
const CASE_BOUND: u32 = 12;
/// Shrinking steps per kill: each is a case on a new Postgres, so few.
const SHRINK: u32 = 3;

fn property(variant: Variant, name: &str, cases: u32) -> PropertyOutcome {
    let run = RunConfig {
        variant,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig {
        max_shrink_iters: SHRINK,
        persist_failures: false,
        ..PropertyConfig::new(name, cases, run)
    };
    check_with(
        &cfg,
        postgres_crash(scenarios(cfg.max_processes, cfg.max_ops, 0)),
    )
}

#[test]
fn sync_engine_keeps_every_acknowledged_claim_through_postgres_crashes() {
    let _serial = super::one_at_a_time();
    let o = property(Variant::Correct, "sync_postgres_crash", cases(6, 3));
    assert_passed(&o);
}

#[test]
fn a_postgres_crash_kills_d9() {
    let _serial = super::one_at_a_time();
    let d9 = property(Variant::D9, "postgres_crash_d9", CASE_BOUND);
    report(&d9);
    assert!(
        d9.harness_error.is_none(),
        "harness error: {:?}",
        d9.harness_error
    );
    let minimal = d9
        .minimal
        .as_ref()
        .unwrap_or_else(|| panic!("D9 survived {CASE_BOUND} Postgres crashes"));
    assert!(
        minimal.invariants().iter().any(|i| i == "I6"),
        "D9 was caught, but not by a lost acknowledgement (I6): {:?}",
        minimal.findings
    );
}
