//! A scenario's command line (clap): its options here, the settings they resolve to by
//! concern in [`settings`], resolved and checked in [`resolve`].

mod resolve;
mod settings;

pub(crate) use settings::{Settings, Tolerances};

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Parser, ValueEnum};
use coupon_engine::{Persistence, Variant};

/// Text appended to `--help`: the exit codes and a few commands.
pub(crate) const AFTER_HELP: &str = "\
Exit codes:
  0  PASS: every invariant held, every threshold passed, no regression against --baseline
  1  FAIL: an invariant (I1-I7) was violated
  2  FAIL: a Goose --threshold failed or a metric regressed against --baseline
  3  setup or infrastructure error (bad option, backends unavailable, seeding, the target
     never answered, reports could not be written, a --nemesis fault could not be injected)

Examples:
  coupon-loadtest flash-sale
  coupon-loadtest lifecycle --duration 10 --baseline reports/baselines/lifecycle.json
  coupon-loadtest checkout --duration 10      # orders lock, pay, cancel, abandon; one coupon raced
  coupon-loadtest flash-sale --duration 10 --mutant d1 --increase-rate 1000   # must exit 1 (I1)
  coupon-loadtest flash-sale --duration 10 --nemesis redis-stale-restart   # must pass
  coupon-loadtest flash-sale --duration 10 --nemesis redis-master-kill     # must pass (cluster)
  coupon-loadtest flash-sale --target http://127.0.0.1:8080 --admin-token $TOKEN
  coupon-loadtest flash-sale --servers 3 --spread request     # three coupon-server processes
  coupon-loadtest flash-sale --target $URL --template $ID --no-audit   # one of N generators
  coupon-loadtest audit reports/<run A> reports/<run B> --admin-token $TOKEN   # merged audit
  coupon-loadtest flash-sale --arrival-profile 1s:20000,5s:20000,3s:0   # open model: an arrival spike
  coupon-loadtest flash-sale --arrival-rate 5000 --duration 10 --compare-closed 200
  coupon-loadtest capacity --slo 'p99<50ms' --require-rate 5000   # the knee (see capacity --help)
  coupon-loadtest trend reports/   # throughput, latency, knees and ratios across runs";

/// The load-test scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum ScenarioKind {
    /// Many shoppers race for one hot template whose stock is far below demand.
    #[default]
    FlashSale,
    /// Claim → redeem → refund with duplicates, clashing orders and cross-user attempts.
    #[value(alias = "claim-redeem-refund")]
    Lifecycle,
    /// Several templates (both refund policies, three discount kinds) and browsing.
    Mixed,
    /// The order's side: orders placed with a coupon (lock), paid (redeem), cancelled
    /// (release) or abandoned (the lock lapses), one coupon raced onto several orders at
    /// once (mall #1003's shape) and cross-user attempts.
    Checkout,
}

impl ScenarioKind {
    /// The name on the command line and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::FlashSale => "flash-sale",
            Self::Lifecycle => "lifecycle",
            Self::Mixed => "mixed",
            Self::Checkout => "checkout",
        }
    }
}

/// How shoppers' requests are shared out among several servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Spread {
    /// Each shopper sticks to one server (shopper n → server n mod servers), as behind a
    /// balancer with session affinity.
    Sticky,
    /// Every request goes to the next server in turn, so one shopper's retries and
    /// duplicates land on different servers.
    Request,
}

/// The settings of a scenario's command line (`["coupon-loadtest", "flash-sale", …]`).
pub(crate) fn parse_run<I, T>(args: I) -> anyhow::Result<Settings>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let top = crate::Top::try_parse_from(args)?;
    match top.command.scenario() {
        Ok(cli) => cli.settings(),
        Err(other) => bail!("not a scenario: {other:?}"),
    }
}

/// A scenario's options.
#[derive(Debug, Args)]
pub(crate) struct Cli {
    /// The scenario (from the command's name).
    #[arg(skip)]
    pub scenario: ScenarioKind,
    /// Concurrent Goose users [default: flash-sale 200, lifecycle and checkout 50, mixed 100].
    #[arg(long, short = 'u', value_name = "N")]
    pub users: Option<usize>,
    /// Open model: this many shoppers arrive every second for --duration seconds, each
    /// starting at its scheduled time whether or not the server keeps up; latency is taken
    /// from each arrival's intended start (see --max-in-flight).
    #[arg(long, value_name = "PER_SEC", conflicts_with_all = ["arrival_profile", "users", "increase_rate", "iterations"])]
    pub arrival_rate: Option<f64>,
    /// Open model: the arrival rate in stages DURATION:RATE,… starting from 0 a second, each
    /// moving linearly to its rate over its duration (k6's ramping-arrival-rate), e.g.
    /// `1s:20000,5s:20000,3s:0` (a ramp to the peak within a second, a hold, a decay). The
    /// run lasts the stages' total.
    #[arg(long, value_name = "STAGES", conflicts_with_all = ["users", "increase_rate", "iterations", "duration"])]
    pub arrival_profile: Option<String>,
    /// Open model: most arrivals in flight at once (virtual users, each with a keep-alive
    /// connection per server, like k6's maxVUs); an arrival that finds none free is dropped
    /// and counted in the report.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub max_in_flight: usize,
    /// Open model: after the arrivals, run the same scenario as a closed loop of N virtual
    /// users for as long as the arrivals lasted, on the same sale, and show both side by
    /// side in the report (the closed loop slows down with the server; arrivals do not).
    #[arg(long, value_name = "N")]
    pub compare_closed: Option<usize>,
    /// Stock of the hot template (lifecycle: of each template) [default: flash-sale 500,
    /// lifecycle 1000000, mixed 200].
    #[arg(long, value_name = "N")]
    pub stock: Option<i64>,
    /// flash-sale: run N sales at once — N hot templates, each of --stock and
    /// --per-user-limit, every claim the next shopper's turn on the next template — so the
    /// cost of per-template machinery shows (a platform runs many campaigns at once).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub templates: usize,
    /// Per-user limit of the hot template (lifecycle: of each template) [default: flash-sale
    /// 1, lifecycle 10000, mixed 1].
    #[arg(long, value_name = "N")]
    pub per_user_limit: Option<i32>,
    /// Seconds to run once every user has started [default: 20 unless --iterations].
    #[arg(long, value_name = "SECS", conflicts_with = "iterations")]
    pub duration: Option<u64>,
    /// Each user runs its scenario N times, then the run ends (instead of --duration).
    #[arg(long, value_name = "N")]
    pub iterations: Option<usize>,
    /// Users started per second [default: all users within one second].
    #[arg(long, value_name = "RATE")]
    pub increase_rate: Option<f64>,
    /// Distinct shoppers (user ids with minted tokens), shared out among the Goose users
    /// [default: flash-sale users + 2 x stock x templates (at most 20000), lifecycle 4 x
    /// users, mixed 8 x users].
    #[arg(long, value_name = "N")]
    pub customers: Option<usize>,
    /// Engine variant of the in-process server: correct, or a defect mutant (d1 … d10, with
    /// d5b and d6b; see docs/ARCHITECTURE.md, "Mutants").
    #[arg(long, value_name = "NAME", default_value = "correct")]
    pub mutant: Variant,
    /// Claim persistence of the in-process server: sync or async.
    #[arg(long, value_name = "MODE", default_value = "sync")]
    pub persistence: Persistence,
    /// Inject a fault during the run (on stores of the run's own, never shared ones):
    /// `redis-stale-restart` restarts Redis mid-sale from an older snapshot;
    /// `redis-master-kill` (on a Redis Cluster of the run's own) SIGKILLs the master owning
    /// the hot template's slot; `slot-migration` (on a Redis Cluster of the run's own)
    /// reshards the hot template's slot to another master, ten keys per `MIGRATE`;
    /// `pg-blackhole` / `redis-blackhole` hold every byte between
    /// the servers and Postgres / Redis for 5 s (a partition), then heal; `pg-pause`
    /// SIGSTOPs Postgres for 5 s; `pg-partition-one` (--servers N >= 2) blackholes the first
    /// server's link to Postgres alone for 5 s while the others go on; `server-kill`
    /// (--servers N >= 2) SIGKILLs one server
    /// mid-sale and restarts it; `clock-skew` (--servers N >= 2) runs servers 2 and 3 with
    /// clocks 2 s fast and 2 s slow (libfaketime) on a sale with a claim window;
    /// `pg-failover` runs on a Postgres primary with a streaming standby of the run's own
    /// (see --pg-replication), holds the replication link mid-sale, stops the primary,
    /// promotes the standby and moves the servers' address to it. A sync run must still
    /// pass; the report times each fault's recovery.
    #[arg(long, value_name = "FAULT")]
    pub nemesis: Option<crate::nemesis::NemesisKind>,
    /// With --nemesis pg-failover: how the primary replicates to its standby. `sync`
    /// (synchronous_standby_names set): the failover loses nothing acknowledged and the run
    /// must pass; `async` (Postgres's default): the claims acknowledged while the standby
    /// lagged are lost, and the run must fail naming them (I6).
    #[arg(long, value_name = "MODE", value_enum, default_value = "sync")]
    pub pg_replication: crate::nemesis::PgReplication,
    /// Run the in-process server (or the --servers processes) on a Redis Cluster of the
    /// run's own: 3 masters + 3 replicas from the machine's redis-server on free loopback
    /// ports, torn down after the run.
    #[arg(long)]
    pub redis_cluster: bool,

    /// Test an external server speaking the same API instead of an in-process one (needs
    /// --admin-token). Repeatable: several servers of one deployment (same stores, same
    /// secrets) are driven at once, shared out by --spread.
    #[arg(long = "target", value_name = "URL", requires = "admin_token")]
    pub targets: Vec<String>,
    /// Start N `coupon-server` processes on the run's provisioned Redis and Postgres (one
    /// free loopback port each, shared secrets) instead of the in-process server; stopped
    /// after the run.
    #[arg(long, value_name = "N", conflicts_with = "targets")]
    pub servers: Option<usize>,
    /// The `coupon-server` binary for --servers [default: next to coupon-loadtest;
    /// `coupon-server-mutants` there with --mutant].
    #[arg(
        long,
        value_name = "PATH",
        env = "COUPON_SERVER_BIN",
        requires = "servers"
    )]
    pub server_bin: Option<PathBuf>,
    /// flash-sale: drive this existing template (its id) instead of creating one, so that
    /// generators on several machines race for the same stock.
    #[arg(long, value_name = "ID", requires = "targets")]
    pub template: Option<uuid::Uuid>,
    /// Record only: skip the post-run audit and leave the acknowledgement record in the run
    /// directory, to be merged with other generators' by `coupon-loadtest audit RUN_DIR…`.
    #[arg(long)]
    pub no_audit: bool,
    /// After a sale that sold out: give one coupon per server back to stock and require a
    /// claim on every server to be granted within this many milliseconds (I9; a server
    /// that answers the sold-out flood itself must notice stock returned elsewhere). The
    /// servers' own bound is `--sold-out-recheck-ms` (100 by default). 0: no probe.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub restock_within_ms: u64,
    /// With several servers: `sticky` (each shopper keeps one server) or `request` (every
    /// request goes to the next server in turn).
    #[arg(long, value_name = "HOW", default_value = "sticky")]
    pub spread: Spread,
    /// Admin bearer token of the --target server.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "COUPON_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
    /// The order-service token of the --target servers: the order's operations (lock,
    /// redeem, release, refund) go through it, naming the shopper, as on a deployment where
    /// only the order service acts on orders (without it, shoppers use their own tokens).
    /// The run's own servers always get one.
    #[arg(long, value_name = "TOKEN", requires = "targets")]
    pub service_token: Option<String>,
    /// Directory the run's report directory is created in.
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub report_dir: PathBuf,
    /// Baseline report.json to compare throughput and latency with (e.g.
    /// reports/baselines/flash-sale.json).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Goose threshold passed through, e.g. "p99<500ms" or "error-rate<1%" or
    /// "p95<200ms for POST claim" (repeatable).
    #[arg(long = "threshold", value_name = "RULE")]
    pub thresholds: Vec<String>,
    /// With --baseline: throughput (requests/s, claims/s) must be at least this fraction
    /// of the baseline's.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    pub tolerance_throughput: f64,
    /// With --baseline: p50/p95/p99 of each endpoint must be at most this multiple of the
    /// baseline's.
    #[arg(long, value_name = "FACTOR", default_value_t = 2.0)]
    pub tolerance_latency: f64,
    /// With --baseline: latencies at or below this many milliseconds never count as a
    /// regression (sub-millisecond noise).
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub latency_floor_ms: f64,
    /// Per-request timeout in seconds; a timed-out request is retried with the same ids.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub request_timeout: u64,
    /// Retries of a claim, redeem or refund after a timeout, 5xx or 429 (same ids).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub max_retries: u32,
    /// Fraction of acknowledged claims, redeems and refunds deliberately sent again with
    /// the same ids (idempotency, I7).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    pub duplicate_rate: f64,
    /// Seed of the users' random choices [default: from the clock].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Quieter Goose console: warnings only (no per-user launch lines, no metrics tables;
    /// the run prints its own summary and verdict).
    #[arg(long)]
    pub goose_quiet: bool,
}
