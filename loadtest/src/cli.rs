//! The command line (clap) and the settings it resolves to, with per-scenario defaults.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
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

/// Tolerances of the baseline comparison.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct Tolerances {
    /// Minimum fraction of baseline throughput.
    pub throughput: f64,
    /// Maximum multiple of baseline latency.
    pub latency: f64,
    /// Latencies at or below this never regress (ms).
    pub latency_floor_ms: f64,
}

/// Everything a run needs, defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The scenario.
    pub scenario: ScenarioKind,
    /// Goose users.
    pub users: usize,
    /// Users started per second.
    pub increase_rate: f64,
    /// Run time after ramp-up, seconds (None with iterations).
    pub duration: Option<u64>,
    /// Iterations per user (None with duration).
    pub iterations: Option<usize>,
    /// Stock of the hot template (each template in lifecycle).
    pub stock: i64,
    /// flash-sale: hot templates, each of `stock`.
    pub templates: usize,
    /// Per-user limit of the hot template (each template in lifecycle).
    pub per_user_limit: i32,
    /// Distinct shoppers.
    pub customers: usize,
    /// Engine variant (in-process only).
    pub variant: Variant,
    /// Claim persistence (in-process only).
    pub persistence: Persistence,
    /// Fault injected during the run (in-process only).
    pub nemesis: Option<crate::nemesis::NemesisKind>,
    /// How the run's own Postgres replicates (`--nemesis pg-failover`).
    pub pg_replication: crate::nemesis::PgReplication,
    /// In-process server on a Redis Cluster of the run's own.
    pub redis_cluster: bool,
    /// External servers (empty: the run starts its own).
    pub targets: Vec<String>,
    /// `coupon-server` processes to start (None: in-process, or the targets).
    pub servers: Option<usize>,
    /// The binary of those processes, if not the default.
    pub server_bin: Option<PathBuf>,
    /// How requests are shared among several servers.
    pub spread: Spread,
    /// An existing template to drive instead of seeding (flash-sale).
    pub template: Option<uuid::Uuid>,
    /// Skip the audit (record only).
    pub no_audit: bool,
    /// The restock probe's bound (None: no probe).
    pub restock_within: Option<Duration>,
    /// The --target servers' order-service token.
    pub service_token: Option<String>,
    /// Admin token of the external server.
    pub admin_token: Option<String>,
    /// Parent directory of the run's reports.
    pub report_dir: PathBuf,
    /// Baseline to compare with.
    pub baseline: Option<PathBuf>,
    /// Goose thresholds.
    pub thresholds: Vec<String>,
    /// Baseline tolerances.
    pub tolerances: Tolerances,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Retries after an unknown outcome.
    pub max_retries: u32,
    /// Fraction of deliberate duplicates.
    pub duplicate_rate: f64,
    /// RNG seed.
    pub seed: u64,
    /// Goose console at warnings only.
    pub goose_quiet: bool,
    /// The open model's arrivals (None: Goose's closed loop of users).
    pub open: Option<OpenModel>,
}

/// An open-model run's arrivals.
#[derive(Debug, Clone)]
pub(crate) struct OpenModel {
    /// When shoppers arrive.
    pub profile: crate::profile::Profile,
    /// The profile as the report names it.
    pub text: String,
    /// Most arrivals in flight at once.
    pub max_in_flight: usize,
    /// Virtual users of a closed loop run first for comparison.
    pub compare_closed: Option<usize>,
}

/// Most `coupon-server` processes one run starts (each holds a Postgres pool).
const MAX_SERVERS: usize = 16;

/// Most shoppers minted by default.
const MAX_DEFAULT_CUSTOMERS: usize = 20_000;

/// The sizes of a run, resolved.
struct Sizes {
    users: usize,
    stock: i64,
    per_user_limit: i32,
    customers: usize,
}

impl Cli {
    /// Resolves defaults and validates combinations.
    pub(crate) fn settings(self) -> anyhow::Result<Settings> {
        let kind = self.scenario;
        let Sizes {
            users,
            stock,
            per_user_limit,
            customers,
        } = self.sizes()?;
        let increase_rate = self.increase_rate.unwrap_or(users as f64);
        if !(increase_rate.is_finite() && increase_rate > 0.0) {
            bail!("--increase-rate must be a positive number");
        }
        let duration = self.run_length()?;
        let open = self.open_model(duration)?;
        let duration = open
            .as_ref()
            .map_or(duration, |o| Some(o.profile.length().as_secs().max(1)));
        self.check_targets()?;
        self.check_tuning()?;
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed)
        });
        Ok(Settings {
            scenario: kind,
            users,
            increase_rate,
            duration,
            iterations: self.iterations,
            stock,
            templates: self.templates,
            per_user_limit,
            customers,
            variant: self.mutant,
            persistence: self.persistence,
            nemesis: self.nemesis,
            pg_replication: self.pg_replication,
            redis_cluster: self.redis_cluster,
            targets: self
                .targets
                .iter()
                .map(|t| t.trim_end_matches('/').to_owned())
                .collect(),
            servers: self.servers,
            server_bin: self.server_bin,
            spread: self.spread,
            template: self.template,
            no_audit: self.no_audit,
            restock_within: (self.restock_within_ms > 0)
                .then(|| Duration::from_millis(self.restock_within_ms)),
            service_token: self.service_token,
            admin_token: self.admin_token,
            report_dir: self.report_dir,
            baseline: self.baseline,
            thresholds: self.thresholds,
            tolerances: Tolerances {
                throughput: self.tolerance_throughput,
                latency: self.tolerance_latency,
                latency_floor_ms: self.latency_floor_ms,
            },
            request_timeout: Duration::from_secs(self.request_timeout),
            max_retries: self.max_retries,
            duplicate_rate: self.duplicate_rate,
            seed,
            goose_quiet: self.goose_quiet,
            open,
        })
    }

    /// The open model's arrivals, if asked for, checked.
    fn open_model(&self, duration: Option<u64>) -> anyhow::Result<Option<OpenModel>> {
        let (profile, text) = match (self.arrival_rate, &self.arrival_profile) {
            (None, None) if self.compare_closed.is_some() => {
                bail!(
                    "--compare-closed compares with an open-model run: add --arrival-rate or --arrival-profile"
                )
            }
            (None, None) => return Ok(None),
            (Some(rate), _) => {
                let secs = duration.unwrap_or(20);
                let profile = crate::profile::Profile::constant(rate, Duration::from_secs(secs))?;
                (profile, format!("{rate}/s for {secs} s"))
            }
            (None, Some(text)) => (crate::profile::Profile::parse(text)?, text.clone()),
        };
        if !self.thresholds.is_empty() {
            bail!(
                "--threshold is Goose's and applies to the closed model; an open-model run \
                 reports its response-time percentiles instead"
            );
        }
        for t in &self.targets {
            crate::lean_client::Endpoint::parse(t.trim_end_matches('/')).with_context(|| {
                format!("--target {t}: the open model's client needs http://<ip>:<port>")
            })?;
        }
        if self
            .compare_closed
            .is_some_and(|n| !(1..=100_000).contains(&n))
        {
            bail!("--compare-closed must be between 1 and 100000 users");
        }
        Ok(Some(OpenModel {
            profile,
            text,
            max_in_flight: self.max_in_flight,
            compare_closed: self.compare_closed,
        }))
    }

    /// Users, stock, per-user limit and shoppers: the scenario's defaults, checked.
    fn sizes(&self) -> anyhow::Result<Sizes> {
        let kind = self.scenario;
        let open = self.arrival_rate.is_some() || self.arrival_profile.is_some();
        if open && !(1..=100_000).contains(&self.max_in_flight) {
            bail!("--max-in-flight must be between 1 and 100000");
        }
        let users = self
            .users
            .or(open.then_some(self.max_in_flight))
            .unwrap_or(match kind {
                ScenarioKind::FlashSale => 200,
                ScenarioKind::Lifecycle | ScenarioKind::Checkout => 50,
                ScenarioKind::Mixed => 100,
            });
        if users == 0 {
            bail!("--users must be at least 1");
        }
        let stock = self.stock.unwrap_or(match kind {
            ScenarioKind::FlashSale => 500,
            ScenarioKind::Lifecycle | ScenarioKind::Checkout => 1_000_000,
            ScenarioKind::Mixed => 200,
        });
        if !(1..=1_000_000_000).contains(&stock) {
            bail!("--stock must be between 1 and 1000000000");
        }
        if !(1..=100_000).contains(&self.templates) {
            bail!("--templates must be between 1 and 100000");
        }
        if self.templates > 1 && (kind != ScenarioKind::FlashSale || self.template.is_some()) {
            bail!("--templates applies to flash-sale runs that create their templates");
        }
        let per_user_limit = self.per_user_limit.unwrap_or(match kind {
            ScenarioKind::FlashSale | ScenarioKind::Mixed => 1,
            ScenarioKind::Lifecycle | ScenarioKind::Checkout => 10_000,
        });
        if !(1..=10_000).contains(&per_user_limit) {
            bail!("--per-user-limit must be between 1 and 10000");
        }
        let customers = match self.customers {
            Some(n) => n,
            None => match kind {
                ScenarioKind::FlashSale => {
                    // Every sale's stock twice over (with --templates, all of them).
                    let want = usize::try_from(stock)
                        .unwrap_or(usize::MAX)
                        .saturating_mul(self.templates.max(1))
                        .saturating_mul(2)
                        .saturating_add(users);
                    want.min(MAX_DEFAULT_CUSTOMERS.max(users))
                }
                ScenarioKind::Lifecycle | ScenarioKind::Checkout => users * 4,
                ScenarioKind::Mixed => users * 8,
            },
        };
        if customers < users || customers < 2 {
            bail!("--customers must be at least --users and at least 2 (got {customers})");
        }
        Ok(Sizes {
            users,
            stock,
            per_user_limit,
            customers,
        })
    }

    /// How long the attack runs: `--duration` seconds, or `--iterations` per user.
    fn run_length(&self) -> anyhow::Result<Option<u64>> {
        let duration = match (self.duration, self.iterations) {
            (Some(0), _) => bail!("--duration must be at least 1 second"),
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(20),
        };
        if self.iterations == Some(0) {
            bail!("--iterations must be at least 1");
        }
        Ok(duration)
    }

    /// The options that need the in-process server, refused with `--target`, and the
    /// targets' form.
    fn check_targets(&self) -> anyhow::Result<()> {
        let kind = self.scenario;
        if !self.targets.is_empty() {
            if self.mutant != Variant::Correct {
                bail!("--mutant applies to the in-process server only, not to --target");
            }
            if self.persistence != Persistence::Sync {
                bail!("--persistence applies to the in-process server only, not to --target");
            }
            if self.nemesis.is_some() {
                bail!(
                    "--nemesis needs the in-process server (it restarts the run's own Redis), not --target"
                );
            }
            if self.redis_cluster {
                bail!("--redis-cluster applies to the in-process server only, not to --target");
            }
        }
        if self.pg_replication != crate::nemesis::PgReplication::Sync
            && self.nemesis != Some(crate::nemesis::NemesisKind::PgFailover)
        {
            bail!("--pg-replication applies to --nemesis pg-failover only");
        }
        if self.redis_cluster && self.nemesis.is_some_and(|n| !n.needs_cluster()) {
            bail!(
                "--nemesis {} acts on one redis-server and Postgres of the run's own: not with --redis-cluster",
                self.nemesis.map(|n| n.name()).unwrap_or_default()
            );
        }
        if let Some(n) = self.nemesis
            && n.needs_servers()
            && self.servers.is_none_or(|count| count < 2)
        {
            bail!(
                "--nemesis {} acts on coupon-server processes and needs --servers N with N >= 2 \
                 (one is faulted while the others serve)",
                n.name()
            );
        }
        for t in &self.targets {
            if !(t.starts_with("http://") || t.starts_with("https://")) {
                bail!("--target must be an http:// or https:// URL, not {t:?}");
            }
        }
        if self.template.is_some() && kind != ScenarioKind::FlashSale {
            bail!(
                "--template drives the hot template of flash-sale; other scenarios seed their own"
            );
        }
        Ok(())
    }

    /// Server count, tolerances, rates, timeouts and Goose threshold rules.
    fn check_tuning(&self) -> anyhow::Result<()> {
        if let Some(n) = self.servers
            && !(1..=MAX_SERVERS).contains(&n)
        {
            bail!("--servers must be between 1 and {MAX_SERVERS}");
        }
        if !(self.tolerance_throughput > 0.0 && self.tolerance_throughput <= 1.0) {
            bail!("--tolerance-throughput must be in (0, 1]");
        }
        if self.tolerance_latency < 1.0 {
            bail!("--tolerance-latency must be at least 1.0");
        }
        if !(0.0..=1.0).contains(&self.duplicate_rate) {
            bail!("--duplicate-rate must be in [0, 1]");
        }
        if self.request_timeout == 0 {
            bail!("--request-timeout must be at least 1 second");
        }
        for rule in &self.thresholds {
            rule.parse::<goose::threshold::Threshold>()
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("--threshold {rule:?}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Settings> {
        let mut all = vec!["coupon-loadtest"];
        all.extend_from_slice(args);
        parse_run(all)
    }

    #[test]
    fn defaults_make_a_flash_sale() -> anyhow::Result<()> {
        let s = parse(&["flash-sale"])?;
        assert_eq!((s.users, s.stock, s.per_user_limit), (200, 500, 1));
        assert_eq!(s.duration, Some(20));
        assert_eq!(s.customers, 1200);
        assert!(s.customers as i64 > s.stock, "demand must exceed stock");
        Ok(())
    }

    #[test]
    fn iterations_replace_duration() -> anyhow::Result<()> {
        let s = parse(&["lifecycle", "--iterations", "3"])?;
        assert_eq!((s.duration, s.iterations), (None, Some(3)));
        assert!(parse(&["lifecycle", "--iterations", "3", "--duration", "5"]).is_err());
        Ok(())
    }

    #[test]
    fn alias_and_bad_values() {
        assert!(parse(&["claim-redeem-refund"]).is_ok());
        assert!(parse(&["flash-sale", "--mutant", "d99"]).is_err());
        assert!(parse(&["flash-sale", "--threshold", "p100<1s"]).is_err());
        assert!(parse(&["flash-sale", "--users", "0"]).is_err());
    }

    #[test]
    fn several_servers() -> anyhow::Result<()> {
        let s = parse(&[
            "flash-sale",
            "--target",
            "http://a:1/",
            "--target",
            "http://b:2",
            "--admin-token",
            "t",
            "--spread",
            "request",
        ])?;
        assert_eq!(s.targets, ["http://a:1", "http://b:2"]);
        assert_eq!(s.spread, Spread::Request);
        let s = parse(&["flash-sale", "--servers", "3", "--mutant", "d1"])?;
        assert_eq!((s.servers, s.spread), (Some(3), Spread::Sticky));
        assert!(parse(&["flash-sale", "--servers", "0"]).is_err());
        assert_eq!(
            parse(&["flash-sale", "--templates", "1000"])?.templates,
            1000
        );
        assert!(parse(&["flash-sale", "--templates", "0"]).is_err());
        assert!(parse(&["lifecycle", "--templates", "2"]).is_err());
        assert!(parse(&["flash-sale", "--servers", "2", "--target", "http://a:1"]).is_err());
        assert!(parse(&["flash-sale", "--server-bin", "x"]).is_err());
        let id = "7f1b3c1e-1a2b-4c3d-8e4f-0123456789ab";
        assert!(
            parse(&[
                "lifecycle",
                "--target",
                "http://a:1",
                "--admin-token",
                "t",
                "--template",
                id
            ])
            .is_err()
        );
        assert!(
            parse(&["flash-sale", "--template", id]).is_err(),
            "needs --target"
        );
        assert!(parse(&["lifecycle", "--service-token", "s"]).is_err());
        Ok(())
    }
}
