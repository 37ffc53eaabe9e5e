//! `coupon-loadtest bench`: its command line.

use std::path::PathBuf;

use clap::Parser;

/// Measures the engine and the harness side by side with their anchors, in one run, on
/// this machine, at the same concurrency: `redis-benchmark` of the engine's own claim
/// script, `pgbench` single-row INSERT and hot-row transactions, the engine in-process and
/// over HTTP (sold-out, sync granted, async granted), and the ratios between them. Writes
/// reports/<UTC time>-bench/ (report.md, report.json, index.html).
#[derive(Debug, Parser)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct BenchCli {
    /// Seconds each row is measured for.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub seconds: u64,
    /// Times the whole sequence of rows is measured (anchors, engine, anchors again); the
    /// report leads with each ratio's median over the rounds and shows its spread.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: usize,
    /// Concurrent clients of the Redis and engine rows.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub connections: usize,
    /// Tokio worker threads of the engine's HTTP server, as `coupon-server --worker-threads`.
    /// One by default (a current-thread runtime): on a small machine where the load
    /// generator, Redis and Postgres share the cores with the server, a second worker mostly
    /// adds cross-thread wake-ups (docs/speed-log.md).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub server_threads: usize,
    /// Concurrent clients of the pgbench rows.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub pg_clients: usize,
    /// Where the report directory is written.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub report_dir: PathBuf,
    /// Committed ratios to compare with (e.g. reports/baselines/bench-ratios.json): exit 2
    /// when a ratio falls below `--min-fraction` of its baseline.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Fraction of a baseline ratio a run may fall to before it fails.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    pub min_fraction: f64,
    /// Also write the ratios of this run as a baseline file.
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
}

const AFTER_HELP: &str = "\
Exit codes: 0 measured (and no ratio below its baseline bound), 2 a ratio fell below
--min-fraction of its baseline, 3 setup error.

Ratios travel between machines far better than absolute figures: compare ratios. On a
machine whose speed drifts, --rounds 5 gives each ratio's median and spread in one run.
Examples:
  cargo run --release -p coupon-loadtest -- bench
  cargo run --release -p coupon-loadtest -- bench --rounds 5
  cargo run --release -p coupon-loadtest -- bench --seconds 2 --baseline reports/baselines/bench-ratios.json";

impl BenchCli {
    /// Checks the numbers make sense.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=600).contains(&self.seconds),
            "--seconds must be 1..=600"
        );
        anyhow::ensure!((1..=50).contains(&self.rounds), "--rounds must be 1..=50");
        anyhow::ensure!(
            (1..=1000).contains(&self.connections),
            "--connections must be 1..=1000"
        );
        anyhow::ensure!(
            (1..=64).contains(&self.server_threads),
            "--server-threads must be 1..=64"
        );
        anyhow::ensure!(
            (1..=200).contains(&self.pg_clients),
            "--pg-clients must be 1..=200"
        );
        anyhow::ensure!(
            self.min_fraction > 0.0 && self.min_fraction <= 1.0,
            "--min-fraction must be in (0, 1]"
        );
        Ok(())
    }
}
