//! `coupon-loadtest capacity`: what arrival rate can the service take with its latency
//! objective met and nothing oversold? Runs the scenario in the open model at a rising
//! arrival rate — doubling from `--start-rate` until a step misses the objective, then
//! halving the gap `--refine` times — each step a whole run of its own, audited (I1–I7).
//! The knee is the highest rate at which the objective held and every invariant passed.
//! A step that breaks an invariant ends the search: the run fails on the invariants, not
//! on the objective.

mod page;
mod slo;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{
    arrivals::{ClosedFigures, Percentiles},
    cli::{self, ScenarioKind},
    progress::phase,
    report::Report,
    run_outcome::{EXIT_SETUP, RunOutcome},
    runner,
};
use slo::Slo;

/// Find the highest arrival rate at which a latency objective holds and nothing is oversold.
#[derive(Debug, Parser)]
#[command(
    after_help = "Exit codes: 0 a knee was found (at or above --require-rate), 1 a step broke \
an invariant, 2 the knee is below --require-rate (or no step met the objective), 3 setup \
error or bad option.\n\nExample:\n  coupon-loadtest capacity --slo 'p99<50ms' --require-rate 5000"
)]
pub(crate) struct CapacityCli {
    /// The scenario each step runs.
    #[arg(long, value_enum, default_value = "flash-sale")]
    scenario: ScenarioKind,
    /// The latency objective on the response time (from each arrival's intended start):
    /// PERCENTILE<BOUND with p50, p90, p95, p99, p99.9 or max and us, ms or s.
    #[arg(long, default_value = "p99<50ms")]
    slo: String,
    /// Largest share of arrivals dropped (no free virtual user) or answered with a timeout
    /// or 5xx in a step that still meets the objective: `1%` or `0.01`.
    #[arg(long, default_value = "1%")]
    error_budget: String,
    /// The first step's arrival rate, a second.
    #[arg(long, default_value_t = 1000.0)]
    start_rate: f64,
    /// The search stops rising here.
    #[arg(long, default_value_t = 256_000.0)]
    max_rate: f64,
    /// Seconds each step's arrivals last.
    #[arg(long, default_value_t = 5)]
    step_secs: u64,
    /// Steps that halve the gap between the last rate that held and the first that did not.
    #[arg(long, default_value_t = 3)]
    refine: u32,
    /// Exit 2 when the knee is below this rate.
    #[arg(long, value_name = "RATE")]
    require_rate: Option<f64>,
    /// Most arrivals in flight at once in a step.
    #[arg(long, default_value_t = 200)]
    max_in_flight: usize,
    /// Users of the closed loop run after the first step's arrivals (on its sale), for the
    /// closed-model figure beside the curve (0: none).
    #[arg(long, default_value_t = 200)]
    closed_users: usize,
    /// Test external servers instead of starting one (see `coupon-loadtest --help`).
    #[arg(long = "target", value_name = "URL")]
    targets: Vec<String>,
    /// Admin token of the --target servers.
    #[arg(long, env = "COUPON_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Start N coupon-server processes instead of the in-process server.
    #[arg(long, value_name = "N")]
    servers: Option<usize>,
    /// Engine variant of the run's own servers (a defect mutant must fail on invariants).
    #[arg(long, default_value = "correct")]
    mutant: String,
    /// Directory the search's report directory is created in.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    report_dir: PathBuf,
    /// Seed of the shoppers' random choices.
    #[arg(long)]
    seed: Option<u64>,
}

/// One step of the search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Step {
    /// Arrivals a second asked for, and started.
    pub rate: f64,
    pub achieved_per_sec: f64,
    /// The step's own run directory (under `steps/`).
    pub run_id: String,
    /// Every invariant held.
    pub invariants_ok: bool,
    /// What failed, in words.
    pub failures: Vec<String>,
    pub response_ms: Percentiles,
    pub service_ms: Percentiles,
    /// The objective's percentile of the response time, ms.
    pub slo_value_ms: f64,
    pub scheduled: u64,
    pub dropped: u64,
    /// Timeouts, transport errors and 5xx answers.
    pub failed_requests: u64,
    /// (dropped + failed) / scheduled.
    pub error_share: f64,
    /// The objective held (latency and error budget).
    pub slo_met: bool,
    /// The generator, not the server, fell behind the schedule.
    pub generator_limited: bool,
}

impl Step {
    fn passed(&self) -> bool {
        self.invariants_ok && self.slo_met
    }
}

/// The search's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Capacity {
    pub scenario: String,
    pub started_at: String,
    pub git_commit: String,
    pub slo: Slo,
    pub slo_text: String,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// The highest rate that passed (None: none did).
    pub knee: Option<f64>,
    /// The knee was set by the generator's own limit, not the server's.
    pub knee_generator_limited: bool,
    pub closed: Option<ClosedFigures>,
    pub require_rate: Option<f64>,
    pub exit_code: u8,
    /// Why it failed, in words.
    pub failures: Vec<String>,
}

impl CapacityCli {
    /// The command line of one step's run.
    fn step_args(&self, rate: f64, steps_dir: &std::path::Path, first: bool) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "coupon-loadtest".into(),
            self.scenario.name().into(),
            "--arrival-rate".into(),
            format!("{rate}"),
            "--duration".into(),
            self.step_secs.to_string(),
            "--max-in-flight".into(),
            self.max_in_flight.to_string(),
            "--goose-quiet".into(),
            "--report-dir".into(),
            steps_dir.display().to_string(),
        ];
        if self.targets.is_empty() {
            args.extend(["--mutant".into(), self.mutant.clone()]);
        }
        for t in &self.targets {
            args.extend(["--target".into(), t.clone()]);
        }
        if let Some(token) = &self.admin_token {
            args.extend(["--admin-token".into(), token.clone()]);
        }
        if let Some(n) = self.servers {
            args.extend(["--servers".into(), n.to_string()]);
        }
        if let Some(seed) = self.seed {
            args.extend(["--seed".into(), seed.to_string()]);
        }
        if first && self.closed_users > 0 {
            args.extend(["--compare-closed".into(), self.closed_users.to_string()]);
        }
        args
    }

    fn step_settings(
        &self,
        rate: f64,
        steps_dir: &std::path::Path,
        first: bool,
    ) -> anyhow::Result<cli::Settings> {
        let args = self.step_args(rate, steps_dir, first);
        cli::parse_run(&args).map_err(|e| match e.downcast::<clap::Error>() {
            Ok(clap) => anyhow::anyhow!("{}", clap.render()),
            Err(e) => e,
        })
    }

    /// Every option checked before anything runs or is written.
    fn check(&self) -> anyhow::Result<Slo> {
        let slo = Slo::parse(&self.slo, &self.error_budget)?;
        for (name, rate) in [
            ("--start-rate", self.start_rate),
            ("--max-rate", self.max_rate),
        ] {
            if !(rate.is_finite() && rate >= 1.0) {
                anyhow::bail!("{name} must be at least 1 arrival a second (got {rate})");
            }
        }
        if self.max_rate < self.start_rate {
            anyhow::bail!("--max-rate must be at least --start-rate");
        }
        if self
            .require_rate
            .is_some_and(|r| !(r.is_finite() && r > 0.0))
        {
            anyhow::bail!("--require-rate must be above 0");
        }
        if !(1..=3600).contains(&self.step_secs) {
            anyhow::bail!("--step-secs must be between 1 and 3600");
        }
        if self.refine > 10 {
            anyhow::bail!("--refine must be at most 10");
        }
        // A step's own options (targets, mutant, sizes), as its run will parse them.
        self.step_settings(self.start_rate, std::path::Path::new("."), true)?;
        Ok(slo)
    }
}

/// Runs the search; its exit code.
pub(crate) async fn run(cli: CapacityCli) -> anyhow::Result<u8> {
    let slo = match cli.check() {
        Ok(slo) => slo,
        Err(e) => {
            eprintln!("coupon-loadtest capacity: {e:#}");
            return Ok(EXIT_SETUP);
        }
    };
    let started_at = OffsetDateTime::now_utc();
    let dir = crate::report_dir::create(&cli.report_dir, started_at, "capacity")?;
    let steps_dir = dir.join("steps");
    phase(
        "capacity",
        format!(
            "{}: {} from {}/s, {} s a step; writing {}",
            cli.scenario.name(),
            slo.describe(),
            cli.start_rate,
            cli.step_secs,
            dir.display()
        ),
    );
    let mut search = Search {
        cli: &cli,
        slo,
        steps_dir,
        steps: Vec::new(),
        closed: None,
    };
    let broken = search.rise_then_refine().await?;
    let result = search.conclude(started_at, broken);
    page::write_all(&dir, &result)?;
    page::print_summary(&result, &dir);
    Ok(result.exit_code)
}

/// The search's state.
struct Search<'a> {
    cli: &'a CapacityCli,
    slo: Slo,
    steps_dir: PathBuf,
    steps: Vec<Step>,
    closed: Option<ClosedFigures>,
}

impl Search<'_> {
    /// Doubles until a step fails, then bisects; true when a step broke an invariant.
    async fn rise_then_refine(&mut self) -> anyhow::Result<bool> {
        let (mut good, mut bad): (Option<f64>, Option<f64>) = (None, None);
        let mut rate = self.cli.start_rate;
        loop {
            let step = self.step(rate).await?;
            if !step.invariants_ok {
                return Ok(true);
            }
            if step.passed() {
                good = Some(rate);
                if rate >= self.cli.max_rate {
                    break;
                }
                rate = (rate * 2.0).min(self.cli.max_rate);
            } else {
                bad = Some(rate);
                break;
            }
        }
        for _ in 0..self.cli.refine {
            let (Some(lo), Some(hi)) = (good, bad) else {
                break;
            };
            let mid = ((lo + hi) / 2.0).round();
            if mid <= lo || mid >= hi {
                break;
            }
            let step = self.step(mid).await?;
            if !step.invariants_ok {
                return Ok(true);
            }
            if step.passed() {
                good = Some(mid);
            } else {
                bad = Some(mid);
            }
        }
        Ok(false)
    }

    /// One step at `rate`, recorded.
    async fn step(&mut self, rate: f64) -> anyhow::Result<Step> {
        let first = self.steps.is_empty();
        phase(
            "capacity",
            format!("step {}: {rate}/s", self.steps.len() + 1),
        );
        let settings = self.cli.step_settings(rate, &self.steps_dir, first)?;
        let (verdict, report) = runner::run_to_report(settings)
            .await
            .with_context(|| format!("the step at {rate}/s"))?;
        let step = self.judge(rate, verdict, &report);
        if let Some(closed) = report.open_model.as_ref().and_then(|o| o.closed.clone()) {
            self.closed = Some(closed);
        }
        phase(
            "capacity",
            format!(
                "step at {rate}/s: {} {:.1} ms, {:.2}% dropped or failed, invariants {} → {}",
                self.slo.quantile.name(),
                step.slo_value_ms,
                step.error_share * 100.0,
                if step.invariants_ok { "held" } else { "BROKEN" },
                if step.passed() {
                    "holds"
                } else {
                    "does not hold"
                }
            ),
        );
        self.steps.push(step.clone());
        Ok(step)
    }

    fn judge(&self, rate: f64, verdict: RunOutcome, report: &Report) -> Step {
        let invariants_ok = report.invariants.iter().all(|i| i.passed);
        let failed_requests: u64 = report.endpoints.iter().map(|e| e.failed).sum();
        let (response, service, scheduled, dropped, achieved, limited) =
            report.open_model.as_ref().map_or(
                (
                    Percentiles::default(),
                    Percentiles::default(),
                    0,
                    0,
                    0.0,
                    false,
                ),
                |o| {
                    (
                        o.response_ms,
                        o.service_ms,
                        o.scheduled,
                        o.dropped,
                        o.achieved_per_sec,
                        o.generator_limited,
                    )
                },
            );
        let error_share = if scheduled == 0 {
            1.0
        } else {
            (dropped + failed_requests) as f64 / scheduled as f64
        };
        let slo_value_ms = self.slo.quantile.of(&response);
        let slo_met = slo_value_ms < self.slo.below_ms
            && error_share <= self.slo.error_budget
            && !matches!(verdict, RunOutcome::InvariantViolated);
        Step {
            rate,
            achieved_per_sec: achieved,
            run_id: report.run_id.clone(),
            invariants_ok,
            failures: report.failures.clone(),
            response_ms: response,
            service_ms: service,
            slo_value_ms,
            scheduled,
            dropped,
            failed_requests,
            error_share,
            slo_met,
            generator_limited: limited,
        }
    }

    fn conclude(self, started_at: OffsetDateTime, broken: bool) -> Capacity {
        let knee_step = self
            .steps
            .iter()
            .filter(|s| s.passed())
            .max_by(|a, b| a.rate.total_cmp(&b.rate));
        // A service that breaks an invariant has no capacity worth naming.
        let knee = knee_step.map(|s| s.rate).filter(|_| !broken);
        // The first rate above the knee that failed: if the generator fell behind there,
        // the knee is the generator's limit, not the server's.
        let above = self
            .steps
            .iter()
            .filter(|s| !s.passed() && knee.is_none_or(|k| s.rate > k))
            .min_by(|a, b| a.rate.total_cmp(&b.rate));
        let knee_generator_limited = above.is_some_and(|s| s.generator_limited);
        let mut failures = Vec::new();
        let exit_code = if broken {
            if let Some(s) = self.steps.iter().find(|s| !s.invariants_ok) {
                failures.push(format!(
                    "an invariant broke at {}/s: {}",
                    s.rate,
                    s.failures.join("; ")
                ));
            }
            1
        } else {
            match (knee, self.cli.require_rate) {
                (None, _) => {
                    failures.push(format!(
                        "no step met the objective ({}), not even {}/s",
                        self.slo.describe(),
                        self.cli.start_rate
                    ));
                    2
                }
                (Some(k), Some(r)) if k < r => {
                    failures.push(format!("the knee {k}/s is below --require-rate {r}/s"));
                    2
                }
                _ => 0,
            }
        };
        Capacity {
            scenario: self.cli.scenario.name().to_owned(),
            started_at: started_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            git_commit: crate::report_dir::git_commit(),
            slo: self.slo,
            slo_text: self.slo.describe(),
            steps: self.steps,
            knee,
            knee_generator_limited,
            closed: self.closed,
            require_rate: self.cli.require_rate,
            exit_code,
            failures,
        }
    }
}
