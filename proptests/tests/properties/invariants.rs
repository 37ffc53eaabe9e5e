//! The correct engine against generated concurrent scenarios, with and without faults:
//! I1–I9 must hold in every case (docs/ARCHITECTURE.md, "Invariants"). Case counts come
//! from `COUPON_PROPTEST_CASES`; the defaults are sized for CI's release build, deep enough
//! to find a bug that shows once in a few dozen cases (a debug build runs a quick look).

use coupon_engine::Persistence;
use coupon_proptests::{
    property::{PropertyConfig, check_property},
    run::RunConfig,
};

use super::{assert_passed, cases};

#[test]
fn sync_engine_holds_every_invariant_without_faults() {
    let _serial = super::one_at_a_time();
    let cfg = PropertyConfig::new("sync_no_faults", cases(160, 24), RunConfig::default());
    assert_passed(&check_property(&cfg));
}

#[test]
fn sync_engine_holds_every_invariant_under_faults() {
    let _serial = super::one_at_a_time();
    let cfg = PropertyConfig {
        max_faults: 3,
        ..PropertyConfig::new("sync_faults", cases(48, 24), RunConfig::default())
    };
    assert_passed(&check_property(&cfg));
}

#[test]
fn async_engine_holds_every_invariant_without_faults() {
    let _serial = super::one_at_a_time();
    let run = RunConfig {
        persistence: Persistence::Async,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig::new("async_no_faults", cases(48, 12), run);
    assert_passed(&check_property(&cfg));
}
