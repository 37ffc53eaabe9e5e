//! Postgres loses its primary's memory, each case on Postgres servers of its own:
//! - a crash: an immediate shutdown, then a restart through crash recovery;
//! - a failover: a primary and a synchronous `pg_basebackup` standby, reached through a
//!   proxy standing for a VIP, which the nemesis moves to the promoted standby.
//!
//! Claim batches are answered from their commit, which is flushed (and, with a synchronous
//! standby, on the standby), so in sync mode the correct engine holds I1–I7 and I9 through
//! both; mutant D9, which commits without waiting and answers at once, loses acknowledged
//! claims (I6).

use coupon_engine::Variant;
use coupon_proptests::{
    mutation::{postgres_crash, postgres_failover},
    property::{PropertyConfig, PropertyOutcome, check_with},
    run::RunConfig,
    scenario::scenarios,
};

use super::{assert_passed, cases, report};

/// Cases D9 may survive before the test fails.
const CASE_BOUND: u32 = 12;
/// Shrinking steps per kill: each is a case on new Postgres servers, so few.
const SHRINK: u32 = 3;

/// What strikes Postgres in every case.
#[derive(Clone, Copy)]
enum Fault {
    Crash,
    Failover,
}

fn property(fault: Fault, variant: Variant, name: &str, cases: u32) -> PropertyOutcome {
    let run = RunConfig {
        variant,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig {
        max_shrink_iters: SHRINK,
        persist_failures: false,
        ..PropertyConfig::new(name, cases, run)
    };
    let base = scenarios(cfg.max_processes, cfg.max_ops, 0);
    match fault {
        Fault::Crash => check_with(&cfg, postgres_crash(base)),
        Fault::Failover => check_with(&cfg, postgres_failover(base)),
    }
}

/// D9 must be caught within [`CASE_BOUND`] cases, by a lost acknowledgement.
fn d9_is_killed(fault: Fault, name: &str, what: &str) {
    let d9 = property(fault, Variant::D9, name, CASE_BOUND);
    report(&d9);
    assert!(
        d9.harness_error.is_none(),
        "harness error: {:?}",
        d9.harness_error
    );
    let minimal = d9
        .minimal
        .as_ref()
        .unwrap_or_else(|| panic!("D9 survived {CASE_BOUND} {what}"));
    assert!(
        minimal.invariants().iter().any(|i| i == "I6"),
        "D9 was caught, but not by a lost acknowledgement (I6): {:?}",
        minimal.findings
    );
}

#[test]
fn sync_engine_keeps_every_acknowledged_claim_through_postgres_crashes() {
    let _serial = super::one_at_a_time();
    let o = property(
        Fault::Crash,
        Variant::Correct,
        "sync_postgres_crash",
        cases(6, 3),
    );
    assert_passed(&o);
}

#[test]
fn a_postgres_crash_kills_d9() {
    let _serial = super::one_at_a_time();
    d9_is_killed(Fault::Crash, "postgres_crash_d9", "Postgres crashes");
}

#[test]
fn sync_engine_keeps_every_acknowledged_claim_through_a_postgres_failover() {
    let _serial = super::one_at_a_time();
    let o = property(
        Fault::Failover,
        Variant::Correct,
        "sync_postgres_failover",
        cases(4, 2),
    );
    assert_passed(&o);
}

#[test]
fn a_postgres_failover_kills_d9() {
    let _serial = super::one_at_a_time();
    d9_is_killed(
        Fault::Failover,
        "postgres_failover_d9",
        "Postgres failovers",
    );
}
