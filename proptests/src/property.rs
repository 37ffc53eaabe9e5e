//! The property driver: generates scenarios with proptest, runs each for real, shrinks a
//! failure to a minimal scenario, and writes its history and the checkers' explanation to
//! `target/proptest-histories/<name>.json`. Seeds are printed so any run can be replayed.

use std::{
    path::PathBuf,
    sync::Mutex,
    time::{Duration, Instant},
};

use proptest::{
    strategy::Strategy,
    test_runner::{
        Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
    },
};
use serde::Serialize;

use coupon_verify::validity::Validity;

use crate::{
    run::{CaseReport, FaultNotInjected, RunConfig, run_case},
    scenario::{Scenario, scenarios},
};

/// One property run.
#[derive(Debug, Clone)]
pub struct PropertyConfig {
    /// Name (file names of histories and regressions derive from it).
    pub name: String,
    /// Cases to generate.
    pub cases: u32,
    /// How each case runs.
    pub run: RunConfig,
    /// Most concurrent processes per case.
    pub max_processes: usize,
    /// Most operations per process.
    pub max_ops: usize,
    /// Most faults per case (0: fault-free).
    pub max_faults: usize,
    /// Most shrinking steps after a failure (each is a real run).
    pub max_shrink_iters: u32,
    /// Record failures in `proptest-regressions/` and replay them first. Off for runs that
    /// are expected to fail (mutants), whose "cases to kill" must count fresh cases.
    pub persist_failures: bool,
}

impl PropertyConfig {
    /// A property named `name` with `cases` cases from `COUPON_PROPTEST_CASES` if set.
    pub fn new(name: &str, default_cases: u32, run: RunConfig) -> Self {
        Self {
            name: name.to_owned(),
            cases: env_u32("COUPON_PROPTEST_CASES").unwrap_or(default_cases),
            run,
            max_processes: 8,
            max_ops: 10,
            max_faults: 0,
            max_shrink_iters: env_u32("COUPON_PROPTEST_SHRINK_ITERS").unwrap_or(48),
            persist_failures: true,
        }
    }
}

/// What a property run found.
#[derive(Debug, Clone, Serialize)]
pub struct PropertyOutcome {
    /// Property name.
    pub name: String,
    /// The seed (hex), to replay with `COUPON_PROPTEST_SEED`.
    pub seed: String,
    /// Cases executed, shrinking included.
    pub executions: u32,
    /// The generated case that first failed (1-based), if any.
    pub first_failure_at: Option<u32>,
    /// The shrunk failing case.
    pub minimal: Option<CaseReport>,
    /// Some case violated an invariant (a checker found it invalid). A case whose checkers
    /// could not decide fails too, but violates nothing: it kills no mutant.
    pub violated: bool,
    /// Where its history was written.
    pub history_path: Option<PathBuf>,
    /// A harness error (not a verdict), if the run could not be carried out.
    pub harness_error: Option<String>,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl PropertyOutcome {
    /// True when every case passed.
    pub fn passed(&self) -> bool {
        self.minimal.is_none() && self.harness_error.is_none()
    }
}

fn env_u32(key: &str) -> Option<u32> {
    std::env::var(key).ok()?.parse().ok()
}

fn seed() -> [u8; 32] {
    if let Ok(hex) = std::env::var("COUPON_PROPTEST_SEED") {
        let mut s = [0u8; 32];
        for (i, b) in s.iter_mut().enumerate() {
            *b = hex
                .get(i * 2..i * 2 + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .unwrap_or(0);
        }
        return s;
    }
    let mut s = [0u8; 32];
    let a = uuid::Uuid::new_v4().into_bytes();
    let b = uuid::Uuid::new_v4().into_bytes();
    s[..16].copy_from_slice(&a);
    s[16..].copy_from_slice(&b);
    s
}

/// Directory of failing histories.
pub fn histories_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("proptest-histories")
}

/// Generates, runs and (on failure) shrinks scenarios; never panics.
pub fn check_property(cfg: &PropertyConfig) -> PropertyOutcome {
    check_with(
        cfg,
        scenarios(cfg.max_processes, cfg.max_ops, cfg.max_faults),
    )
}

/// [`check_property`] with an explicit scenario strategy.
pub fn check_with(
    cfg: &PropertyConfig,
    strategy: impl Strategy<Value = Scenario>,
) -> PropertyOutcome {
    let started = Instant::now();
    let seed = seed();
    let seed_hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    eprintln!(
        "[{}] seed={seed_hex} cases={} (replay: COUPON_PROPTEST_SEED={seed_hex})",
        cfg.name, cfg.cases
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return failed_setup(cfg, seed_hex, e.to_string(), started),
    };
    let config = runner_config(cfg);
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let state = Mutex::new(State::default());
    let result = runner.run(&strategy, |scenario| {
        let report = rt.block_on(run_case(&scenario, cfg.run));
        let mut st = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.executions += 1;
        match report {
            Err(e) if e.is::<FaultNotInjected>() => {
                st.executions -= 1;
                eprintln!("[{}] case set aside: {e:#}", cfg.name);
                Err(TestCaseError::reject(format!("{e:#}")))
            }
            Err(e) => {
                st.harness_error = Some(format!("{e:#}"));
                Err(TestCaseError::fail(format!("harness error: {e:#}")))
            }
            Ok(r) if r.checks.validity == Validity::Valid => Ok(()),
            Ok(r) if r.checks.validity == Validity::Unknown => {
                // Not a pass, and no violation to shrink towards: said as such.
                let msg = format!("unknown: {}", r.checks.undecided().join("; "));
                eprintln!("[{}] case {}: {msg}", cfg.name, st.executions);
                st.last_failure = Some(r);
                Err(TestCaseError::fail(msg))
            }
            Ok(r) => {
                st.violated = true;
                if st.first_failure_at.is_none() {
                    st.first_failure_at = Some(st.executions);
                    eprintln!(
                        "[{}] case {} failed: {:?}; shrinking",
                        cfg.name,
                        st.executions,
                        r.invariants()
                    );
                }
                let msg = format!("violated {:?}: {}", r.invariants(), r.findings[0].detail);
                st.last_failure = Some(r);
                Err(TestCaseError::fail(msg))
            }
        }
    });
    let st = state
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut outcome = PropertyOutcome {
        name: cfg.name.clone(),
        seed: seed_hex,
        executions: st.executions,
        first_failure_at: st.first_failure_at,
        violated: st.violated,
        minimal: None,
        history_path: None,
        harness_error: None,
        elapsed: started.elapsed(),
    };
    conclude(cfg, &mut outcome, result, st);
    outcome
}

/// proptest's configuration: the case count, shrinking, and where failures persist.
fn runner_config(cfg: &PropertyConfig) -> Config {
    Config {
        cases: cfg.cases,
        // A run whose faults keep failing to happen ends as a harness error, not a pass.
        max_global_rejects: cfg.cases.max(3),
        max_shrink_iters: cfg.max_shrink_iters,
        failure_persistence: cfg.persist_failures.then(|| {
            Box::new(FileFailurePersistence::Direct(leak(format!(
                "{}/proptest-regressions/{}.txt",
                env!("CARGO_MANIFEST_DIR"),
                cfg.name
            )))) as Box<dyn proptest::test_runner::FailurePersistence>
        }),
        ..Config::default()
    }
}

/// Files the run's end into `outcome`: nothing on success, the minimal failing case (its
/// history written to disk) on a violation, the reason on a harness error.
fn conclude(
    cfg: &PropertyConfig,
    outcome: &mut PropertyOutcome,
    result: Result<(), TestError<Scenario>>,
    st: State,
) {
    match result {
        Ok(()) => {}
        Err(TestError::Abort(reason)) => outcome.harness_error = Some(reason.to_string()),
        Err(TestError::Fail(reason, _)) => match st.last_failure {
            Some(report)
                if st.harness_error.is_none() || reason.message().starts_with("violated") =>
            {
                outcome.history_path = write_history(&cfg.name, &reason.to_string(), &report);
                if let Some(p) = &outcome.history_path {
                    eprintln!(
                        "[{}] minimal failing case ({} ops) written to {}",
                        cfg.name,
                        report.scenario.size(),
                        p.display()
                    );
                }
                outcome.minimal = Some(report);
            }
            _ => outcome.harness_error = st.harness_error.or(Some(reason.to_string())),
        },
    }
}

#[derive(Default)]
struct State {
    executions: u32,
    first_failure_at: Option<u32>,
    violated: bool,
    last_failure: Option<CaseReport>,
    harness_error: Option<String>,
}

fn failed_setup(
    cfg: &PropertyConfig,
    seed: String,
    err: String,
    started: Instant,
) -> PropertyOutcome {
    PropertyOutcome {
        name: cfg.name.clone(),
        seed,
        executions: 0,
        first_failure_at: None,
        violated: false,
        minimal: None,
        history_path: None,
        harness_error: Some(err),
        elapsed: started.elapsed(),
    }
}

fn leak(s: String) -> &'static str {
    // proptest wants a 'static path; one small string per property run.
    Box::leak(s.into_boxed_str())
}

#[derive(Serialize)]
struct FailureFile<'a> {
    property: &'a str,
    reason: &'a str,
    report: &'a CaseReport,
}

fn write_history(name: &str, reason: &str, report: &CaseReport) -> Option<PathBuf> {
    let dir = histories_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("{name}.json"));
    let json = serde_json::to_string_pretty(&FailureFile {
        property: name,
        reason,
        report,
    })
    .ok()?;
    std::fs::write(&path, json).ok()?;
    // Beside it, the case drawn: its operations, what the findings name, the faults.
    let (counterexample, explanation) = crate::case_page::counterexample(report);
    let page = crate::case_page::page(name, report, &counterexample, &explanation);
    let html = dir.join(format!("{name}.html"));
    match crate::counterexample_page::write(&html, &page) {
        Ok(()) => eprintln!("[{name}] counterexample page: {}", html.display()),
        Err(e) => eprintln!("[{name}] could not write {}: {e}", html.display()),
    }
    Some(path)
}
