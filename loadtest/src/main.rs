//! `coupon-loadtest`: Goose load tests of the coupon engine (docs/ARCHITECTURE.md,
//! "Verification").
//!
//! Runs a scenario (`flash-sale`, `lifecycle`, `mixed`) against an in-process server on
//! freshly provisioned backends, or an external `--target`; records every answer the
//! simulated users saw; audits invariants I1–I7 afterwards; writes
//! `reports/<UTC time>-<scenario>/` (index.html, report.json, report.md, Goose's reports);
//! optionally compares with a baseline. `coupon-loadtest audit RUN_DIR…` audits the merged
//! records of several runs (generators on several machines); `--arrival-rate` and
//! `--arrival-profile` run the open model (`arrivals`), and `coupon-loadtest capacity`
//! searches for the highest arrival rate that meets a latency objective (`capacity`).
//! Exit codes: 0 pass, 1 invariant violated,
//! 2 threshold or regression, 3 setup error.

mod acks;
mod admissions;
mod api;
mod arrivals;
mod attack;
mod audit;
mod baseline;
mod bench;
mod capacity;
mod checks;
mod cli;
mod counterexample;
mod fleet;
mod lean_client;
mod memory;
mod merge;
mod nemesis;
mod own_stores;
mod profile;
mod progress;
mod record;
mod recovery;
mod reply;
mod report;
mod report_dir;
mod rng;
mod run_outcome;
mod runner;
mod scenarios;
mod server;
mod setup;
mod shares;
mod stats;
mod tally;
mod templates;
mod timeline;
mod trend;

use std::process::ExitCode;

use clap::{Parser, Subcommand, error::ErrorKind};
use tracing_subscriber::EnvFilter;

/// The engine servers' allocator (engine/src/bin/server/mod.rs says why): the bench serves
/// the engine in this process, so it must measure what `coupon-server` runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The command line's top: here, as it names every command's module (cli.rs holds the
// scenario's options, which those modules read).
/// Load tests of the coupon engine: runs a scenario against an in-process server on
/// provisioned backends (or an external --target), records every answer the simulated users
/// saw, audits invariants I1-I7 afterwards and writes reports/<UTC time>-<scenario>/; and
/// the commands around it (bench, audit, capacity, trend).
#[derive(Debug, Parser)]
#[command(name = "coupon-loadtest", version, about, after_help = cli::AFTER_HELP)]
pub(crate) struct Top {
    #[command(subcommand)]
    pub command: Command,
}

/// What to run: a scenario, or one of the commands around them.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Many shoppers race for one hot template whose stock is far below demand.
    #[command(after_help = cli::AFTER_HELP)]
    FlashSale(cli::Cli),
    /// Claim → redeem → refund with duplicates, clashing orders and cross-user attempts.
    #[command(alias = "claim-redeem-refund", after_help = cli::AFTER_HELP)]
    Lifecycle(cli::Cli),
    /// Several templates (both refund policies, three discount kinds) and browsing.
    #[command(after_help = cli::AFTER_HELP)]
    Mixed(cli::Cli),
    /// The order's side: orders placed with a coupon (lock), paid (redeem), cancelled
    /// (release) or abandoned (the lock lapses), one coupon raced onto several orders.
    #[command(after_help = cli::AFTER_HELP)]
    Checkout(cli::Cli),
    /// Measure the engine and the harness against their anchors (redis-benchmark,
    /// pgbench), as ratios.
    Bench(bench::BenchCli),
    /// Audit the merged records of several runs (generators on several machines) once.
    Audit(merge::AuditCli),
    /// Find the highest arrival rate that meets a latency objective with every invariant
    /// held.
    Capacity(capacity::CapacityCli),
    /// Draw throughput, latency, knees and bench ratios across many runs' reports.
    Trend(trend::TrendCli),
}

impl Command {
    /// The scenario run and its options, for the scenario commands.
    pub(crate) fn scenario(self) -> Result<cli::Cli, Box<Self>> {
        let (kind, mut cli) = match self {
            Self::FlashSale(cli) => (cli::ScenarioKind::FlashSale, cli),
            Self::Lifecycle(cli) => (cli::ScenarioKind::Lifecycle, cli),
            Self::Mixed(cli) => (cli::ScenarioKind::Mixed, cli),
            Self::Checkout(cli) => (cli::ScenarioKind::Checkout, cli),
            other => return Err(Box::new(other)),
        };
        cli.scenario = kind;
        Ok(cli)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let top = match Top::try_parse() {
        Ok(top) => top,
        Err(e) => return usage_exit(&e),
    };
    init_tracing();
    let scenario = match top.command.scenario() {
        Ok(scenario) => scenario,
        Err(command) => {
            return match *command {
                Command::Bench(c) => command_exit("bench", bench::run(c).await),
                Command::Audit(c) => command_exit("audit", merge::run(c).await),
                Command::Capacity(c) => command_exit("capacity", capacity::run(c).await),
                Command::Trend(c) => command_exit("trend", trend::run(c).await),
                // The scenarios were taken above.
                _ => ExitCode::from(run_outcome::EXIT_SETUP),
            };
        }
    };
    let settings = match scenario.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("coupon-loadtest: {e:#}");
            return ExitCode::from(run_outcome::EXIT_SETUP);
        }
    };
    match runner::run(settings).await {
        Ok(v) => ExitCode::from(v.exit_code()),
        Err(e) => {
            eprintln!("coupon-loadtest: setup error: {e:#}");
            ExitCode::from(run_outcome::EXIT_SETUP)
        }
    }
}

/// A command's result as the exit code: its own on success, a setup error otherwise.
fn command_exit(name: &str, result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("coupon-loadtest {name}: setup error: {e:#}");
            ExitCode::from(run_outcome::EXIT_SETUP)
        }
    }
}

/// Prints a command-line error (or the help it asked for) and the exit code it means:
/// help and version are success, anything else a setup error.
fn usage_exit(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(run_outcome::EXIT_SETUP),
    }
}

/// Logs on stderr (`RUST_LOG`, default warnings plus this tool's info). The `log` crate is
/// left to Goose, which prints its own progress.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("warn,coupon_loadtest=info"));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .finish();
    let _ = tracing::subscriber::set_global_default(subscriber);
}
