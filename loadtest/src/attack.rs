//! Runs Goose: the configuration is built as Goose command-line arguments (so thresholds
//! and timing options mean exactly what Goose documents), Goose writes its own HTML and
//! JSON reports into the run's directory, and the thresholds' results come back.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::{Context, anyhow};
use goose::{config::GooseConfiguration, prelude::*};
use serde::{Deserialize, Serialize};

use crate::{cli::Settings, scenarios};

/// One Goose threshold's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ThresholdRow {
    /// The rule as given.
    pub rule: String,
    /// What Goose observed.
    pub observed: String,
    /// Whether it passed.
    pub passed: bool,
    /// Whether its failure stopped the run early.
    pub aborted: bool,
}

/// What the Goose run returns.
#[derive(Debug)]
pub(crate) struct AttackResult {
    /// Threshold results (empty without --threshold).
    pub thresholds: Vec<ThresholdRow>,
    /// Goose's own report files, relative to the run directory.
    pub goose_reports: Vec<String>,
    /// Wall time of `execute`.
    pub elapsed: Duration,
}

/// Goose's report files written beside ours.
const GOOSE_REPORTS: [&str; 2] = ["goose.html", "goose.json"];

/// The Goose arguments for `s` against `host`, writing reports into `dir`.
fn goose_args(s: &Settings, host: &str, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--host".into(),
        host.into(),
        "--users".into(),
        s.load.users.to_string(),
        "--increase-rate".into(),
        s.load.increase_rate.to_string(),
        "--timeout".into(),
        s.load.request_timeout.as_secs().max(1).to_string(),
        "--no-telnet".into(),
        // Lean: each iteration is one transaction and the run keeps its own exact record,
        // so Goose's transaction and scenario metrics only cost CPU. Its error summary
        // would list every business refusal (409 stock_empty) as an error; the run's own
        // verdict says what failed.
        "--no-transaction-metrics".into(),
        "--no-scenario-metrics".into(),
        "--no-error-summary".into(),
    ];
    for report in GOOSE_REPORTS {
        args.push("--report-file".into());
        args.push(dir.join(report).to_string_lossy().into_owned());
    }
    if let Some(secs) = s.load.duration {
        args.extend(["--run-time".into(), format!("{secs}s")]);
        // Keep the ramp-up in Goose's metrics: a flash sale's first second is the point.
        args.push("--no-reset-metrics".into());
    }
    if let Some(n) = s.load.iterations {
        args.extend(["--iterations".into(), n.to_string()]);
    }
    for rule in &s.gate.thresholds {
        args.extend(["--threshold".into(), rule.clone()]);
    }
    if s.report.goose_quiet {
        args.push("--quiet".into());
        args.push("--no-print-metrics".into());
    }
    args
}

/// Runs the scenario of `ctx` under Goose. Goose's host is the first server; requests name
/// their server in full (`scenarios::call`), so several servers share one Goose run.
pub(crate) async fn run(
    s: &Settings,
    ctx: Arc<scenarios::Ctx>,
    dir: &Path,
) -> anyhow::Result<AttackResult> {
    let host = ctx.servers.bases().first().cloned().unwrap_or_default();
    let args = goose_args(s, &host, dir);
    let config = GooseConfiguration::parse_args_default(&args)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("Goose configuration {args:?}"))?;
    let attack = GooseAttack::initialize_with_config(config)
        .map_err(|e| anyhow!("{e}"))
        .context("initialising Goose")?
        .register_scenario(scenarios::scenario(ctx));
    let started = std::time::Instant::now();
    let thresholds = match attack.execute().await {
        Ok(metrics) => metrics.thresholds.clone(),
        Err(GooseError::ThresholdsFailed { metrics, .. }) => metrics.thresholds.clone(),
        Err(e) => return Err(anyhow!("{e}")).context("running Goose"),
    };
    Ok(AttackResult {
        thresholds: thresholds
            .into_iter()
            .map(|t| ThresholdRow {
                rule: t.rule,
                observed: t.observed,
                passed: t.passed,
                aborted: t.aborted,
            })
            .collect(),
        goose_reports: GOOSE_REPORTS
            .iter()
            .filter(|r| dir.join(r).exists())
            .map(|r| (*r).to_owned())
            .collect(),
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_in_goose() -> anyhow::Result<()> {
        let s = crate::cli::parse_run([
            "x",
            "flash-sale",
            "--threshold",
            "p99<2s",
            "--threshold",
            "error-rate<1%",
        ])?;
        let args = goose_args(&s, "http://127.0.0.1:1", Path::new("/tmp/x"));
        let config = GooseConfiguration::parse_args_default(&args).map_err(|e| anyhow!("{e}"))?;
        assert_eq!(config.users, Some(200));
        assert_eq!(config.threshold.len(), 2);
        let s = crate::cli::parse_run(["x", "lifecycle", "--iterations", "2"])?;
        let args = goose_args(&s, "http://127.0.0.1:1", Path::new("/tmp/x"));
        GooseConfiguration::parse_args_default(&args).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    }
}
