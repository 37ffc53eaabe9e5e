//! The correct engine against generated concurrent scenarios, with and without faults:
//! I1–I9 must hold in every case (DESIGN §6, §7). Case counts come from
//! `COUPON_PROPTEST_CASES`; the defaults keep CI short.

use coupon_engine::Persistence;
use coupon_proptests::{
    property::{PropertyConfig, PropertyOutcome, check_property},
    run::RunConfig,
};

fn assert_passed(o: &PropertyOutcome) {
    assert!(
        o.passed(),
        "{}: {:?}\nminimal case: {:?}\nhistory: {:?}",
        o.name,
        o.harness_error,
        o.minimal.as_ref().map(|m| (m.invariants(), &m.findings)),
        o.history_path
    );
    eprintln!(
        "[{}] {} cases passed in {:.1?} ({:.1} cases/s)",
        o.name,
        o.executions,
        o.elapsed,
        f64::from(o.executions) / o.elapsed.as_secs_f64()
    );
}

#[test]
fn sync_engine_holds_every_invariant_without_faults() {
    let cfg = PropertyConfig::new("sync_no_faults", 24, RunConfig::default());
    assert_passed(&check_property(&cfg));
}

#[test]
fn sync_engine_holds_every_invariant_under_faults() {
    let cfg = PropertyConfig {
        max_faults: 3,
        ..PropertyConfig::new("sync_faults", 24, RunConfig::default())
    };
    assert_passed(&check_property(&cfg));
}

#[test]
fn async_engine_holds_every_invariant_without_faults() {
    let run = RunConfig {
        persistence: Persistence::Async,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig::new("async_no_faults", 12, run);
    assert_passed(&check_property(&cfg));
}
