//! The correct engine against generated concurrent scenarios, with and without faults:
//! I1–I9 must hold in every case (docs/ARCHITECTURE.md, "Invariants"). Case counts come
//! from `COUPON_PROPTEST_CASES`; the defaults are sized for CI's release build, deep enough
//! to find a bug that shows once in a few dozen cases (a debug build runs a quick look).

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

/// Default cases: `release` in an optimised build, `debug` otherwise.
fn cases(release: u32, debug: u32) -> u32 {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

#[test]
fn sync_engine_holds_every_invariant_without_faults() {
    let cfg = PropertyConfig::new("sync_no_faults", cases(200, 24), RunConfig::default());
    assert_passed(&check_property(&cfg));
}

#[test]
fn sync_engine_holds_every_invariant_under_faults() {
    let cfg = PropertyConfig {
        max_faults: 3,
        ..PropertyConfig::new("sync_faults", cases(60, 24), RunConfig::default())
    };
    assert_passed(&check_property(&cfg));
}

#[test]
fn async_engine_holds_every_invariant_without_faults() {
    let run = RunConfig {
        persistence: Persistence::Async,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig::new("async_no_faults", cases(60, 12), run);
    assert_passed(&check_property(&cfg));
}
