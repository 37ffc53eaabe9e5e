//! The stores a run owns under its servers (instead of the shared ones), so that a nemesis
//! may kill, pause, partition or fail them over: what the servers start on, and what the
//! nemesis then acts on.

use std::sync::Arc;

use coupon_testkit::{
    fault_proxy::FaultProxy,
    local::{LocalPostgres, LocalRedis},
    pg_failover::{ReplicatedPostgres, Replication},
    redis_cluster::LocalCluster,
};
use tokio::sync::Mutex;

/// Which Redis the run's servers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedisChoice {
    /// The provisioned one (`COUPON_REDIS_URL`, testcontainers or a local server).
    Shared,
    /// A `redis-server` of the run's own, with AOF, that a fault may restart.
    Own,
    /// A cluster of the run's own (3 masters + 3 replicas) that a fault may fail over.
    OwnCluster,
}

/// What a grey-failure nemesis needs under the servers: stores of the run's own, and the
/// fault proxies the servers reach them through.
#[derive(Debug, Default, Clone)]
pub(crate) struct GreyPlan {
    /// A Postgres of the run's own (`initdb` on a free port), which a fault may pause.
    pub own_postgres: bool,
    /// The servers reach Postgres through a fault proxy.
    pub pg_proxy: bool,
    /// The servers reach Redis through a fault proxy.
    pub redis_proxy: bool,
    /// Servers run with their wall clock off (index, `faketime` offset).
    pub skews: Vec<(usize, String)>,
    /// The first server alone reaches Postgres through a fault proxy (a partition of one).
    pub partition_first: bool,
    /// A Postgres primary with a streaming standby of the run's own, replicating so, that
    /// a fault may fail over (the servers reach it through a proxy standing for a VIP).
    pub replicated_postgres: Option<Replication>,
}

/// The stores and links a grey-failure nemesis acts on.
#[derive(Clone, Default)]
pub(crate) struct GreyStores {
    /// The run's own Postgres.
    pub postgres: Option<Arc<LocalPostgres>>,
    /// The link from the servers to Postgres.
    pub pg_link: Option<Arc<FaultProxy>>,
    /// The link from the servers to Redis.
    pub redis_link: Option<Arc<FaultProxy>>,
    /// The first server's own link to Postgres.
    pub first_server_pg_link: Option<Arc<FaultProxy>>,
    /// The run's own primary and standby.
    pub replicated_postgres: Option<Arc<ReplicatedPostgres>>,
}

/// The run's own Redis, which a fault may kill.
#[derive(Clone)]
pub(crate) enum OwnRedis {
    /// One `redis-server`.
    Node(Arc<Mutex<LocalRedis>>),
    /// A cluster of 3 masters + 3 replicas.
    Cluster(Arc<Mutex<LocalCluster>>),
}
