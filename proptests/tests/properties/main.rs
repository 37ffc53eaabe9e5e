//! The property tests: generated concurrent cases with faults, run for real and judged by
//! the checkers; the mutation table; the published histories. One binary, not one per file
//! (each is a release compile and link of its own).
//!
//! The properties run one at a time, as they did in binaries of their own: several at once
//! on two cores would stretch the fault schedules' timing they are written against.

mod async_redis_kill;
mod external_histories;
mod failover;
mod invariants;
mod mutants;
mod postgres_crash;

/// Held by each property test for its whole run (see the module docs).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Default cases: `release` in an optimised build, `debug` otherwise.
fn cases(release: u32, debug: u32) -> u32 {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// One line on how a property run went.
fn report(o: &coupon_proptests::property::PropertyOutcome) {
    eprintln!(
        "[{}] {} cases in {:.1?}; first failure at {:?}; invariants {:?}; history {:?}",
        o.name,
        o.executions,
        o.elapsed,
        o.first_failure_at,
        o.minimal.as_ref().map(|m| m.invariants()),
        o.history_path
    );
}

/// Fails the test unless every case of `o` passed, naming the minimal failing case.
fn assert_passed(o: &coupon_proptests::property::PropertyOutcome) {
    report(o);
    assert!(
        o.passed(),
        "{}: {:?}\nminimal case: {:?}\nhistory: {:?}",
        o.name,
        o.harness_error,
        o.minimal.as_ref().map(|m| (m.invariants(), &m.findings)),
        o.history_path
    );
}
