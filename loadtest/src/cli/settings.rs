//! What a run needs, defaults resolved, grouped by concern: the load's shape, the sale it
//! seeds, what serves it, what gates its verdict and where it reports.

use std::{path::PathBuf, time::Duration};

use coupon_engine::{Persistence, Variant};

use super::{ScenarioKind, Spread};

/// Everything a run needs, defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The scenario.
    pub scenario: ScenarioKind,
    /// How the shoppers' requests arrive.
    pub load: LoadShape,
    /// What is on sale, and to how many shoppers.
    pub sale: Sale,
    /// What serves the run, and the faults injected under it.
    pub serving: Serving,
    /// What decides the verdict besides the invariants.
    pub gate: Gate,
    /// Where the reports go and what the console shows.
    pub report: ReportOut,
}

/// How the shoppers' requests arrive.
#[derive(Debug, Clone)]
pub(crate) struct LoadShape {
    /// Goose users.
    pub users: usize,
    /// Users started per second.
    pub increase_rate: f64,
    /// Run time after ramp-up, seconds (None with iterations).
    pub duration: Option<u64>,
    /// Iterations per user (None with duration).
    pub iterations: Option<usize>,
    /// The open model's arrivals (None: Goose's closed loop of users).
    pub open: Option<OpenModel>,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Retries after an unknown outcome.
    pub max_retries: u32,
    /// Fraction of deliberate duplicates.
    pub duplicate_rate: f64,
    /// RNG seed.
    pub seed: u64,
}

/// What is on sale, and to how many shoppers.
#[derive(Debug, Clone)]
pub(crate) struct Sale {
    /// Stock of the hot template (each template in lifecycle).
    pub stock: i64,
    /// flash-sale: hot templates, each of `stock`.
    pub templates: usize,
    /// Per-user limit of the hot template (each template in lifecycle).
    pub per_user_limit: i32,
    /// Distinct shoppers.
    pub customers: usize,
    /// An existing template to drive instead of seeding (flash-sale).
    pub template: Option<uuid::Uuid>,
}

/// What serves the run, and the faults injected under it.
#[derive(Debug, Clone)]
pub(crate) struct Serving {
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
    /// The --target servers' order-service token.
    pub service_token: Option<String>,
    /// Admin token of the external server.
    pub admin_token: Option<String>,
}

/// What decides the verdict besides the invariants.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    /// Skip the audit (record only).
    pub no_audit: bool,
    /// The restock probe's bound (None: no probe).
    pub restock_within: Option<Duration>,
    /// Baseline to compare with.
    pub baseline: Option<PathBuf>,
    /// Goose thresholds.
    pub thresholds: Vec<String>,
    /// Baseline tolerances.
    pub tolerances: Tolerances,
}

/// Where the reports go and what the console shows.
#[derive(Debug, Clone)]
pub(crate) struct ReportOut {
    /// Parent directory of the run's reports.
    pub report_dir: PathBuf,
    /// Goose console at warnings only.
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
