//! Failovers of a Redis Cluster (each case on 3 masters + 3 replicas of its own): the master
//! of a template's slot SIGKILLed so its replica takes over, or a replica whose replication
//! was cut promoted with `CLUSTER FAILOVER TAKEOVER`. In sync mode the correct engine holds
//! I1–I7 and I9 through both (a failover loses Redis state, so I8 is reported, not required:
//! see docs/verification.md, "one deliberate limit"), and the failover kills mutant D8, which trusts
//! what the promoted replica admits, by what it issues (I1 or I3) in a rush of claims on one
//! template across the promotion.

use coupon_engine::Variant;
use coupon_proptests::{
    mutation::{caught_by_what_it_issued, score_failover},
    property::{PropertyConfig, check_with},
    run::RunConfig,
    scenario::failover_scenarios,
};

use super::{assert_passed, cases, report};

/// Cases a failover mutant may survive before the test fails.
const CASE_BOUND: u32 = 30;
/// Shrinking steps per kill: each is a case on a new cluster, so few.
const SHRINK: u32 = 3;

#[test]
fn sync_engine_holds_its_invariants_through_failovers() {
    let _serial = super::one_at_a_time();
    let cfg = PropertyConfig {
        max_shrink_iters: SHRINK,
        ..PropertyConfig::new("sync_failover", cases(6, 3), RunConfig::default())
    };
    let o = check_with(&cfg, failover_scenarios(cfg.max_processes, cfg.max_ops));
    assert_passed(&o);
}

#[test]
fn a_lagging_promotion_kills_d8_and_the_correct_engine_survives_it() {
    let _serial = super::one_at_a_time();
    let correct = score_failover(Variant::Correct, cases(4, 2), SHRINK);
    report(&correct);
    assert!(
        correct.passed(),
        "correct engine: {:?} {:?} (see {:?})",
        correct.harness_error,
        correct.minimal.as_ref().map(|m| &m.findings),
        correct.history_path
    );
    let d8 = score_failover(Variant::D8, CASE_BOUND, SHRINK);
    report(&d8);
    assert!(
        d8.harness_error.is_none(),
        "harness error: {:?}",
        d8.harness_error
    );
    let caught_by = d8
        .minimal
        .as_ref()
        .map(|m| m.invariants())
        .unwrap_or_else(|| panic!("D8 survived {CASE_BOUND} lagging promotions"));
    assert!(
        caught_by_what_it_issued(&caught_by),
        "D8 was caught by {caught_by:?}, not by what it issued (I1, I3)"
    );
}
