//! The connection behind the Redis store: one node (a connection manager that reconnects)
//! or a Redis Cluster (the redis crate's async cluster connection, which follows MOVED/ASK,
//! refreshes its slot map and retries through a failover). Every key of a template carries
//! the hash tag `{T}` (`keys.rs`), so each script touches one slot and runs on whichever
//! master owns it. `Script` answers NOSCRIPT (a promoted replica, a flushed cache) by loading
//! the script and running it again, for every script but the claim script, whose NOSCRIPT
//! has the server checked first (`store/redis.rs`).

use std::{
    fmt,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use crate::redact::redact_url;
use redis::{
    Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value,
    aio::{ConnectionLike, ConnectionManager},
    cluster::{ClusterClient, ClusterClientBuilder},
    cluster_async::ClusterConnection,
};

/// Where the engine's Redis is. Shown (`Display`, `Debug`) with passwords redacted.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server (or a proxy in front of several), by URL.
    Node(String),
    /// A Redis Cluster, by seed node URLs (any reachable subset of its nodes).
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// A cluster from a comma-separated list of `redis://` seed nodes.
    pub fn cluster_from_list(list: &str) -> Self {
        Self::Cluster(
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// The URL of the node, or of the first seed node of a cluster (for tools that speak to
    /// one server).
    pub fn first_url(&self) -> &str {
        match self {
            Self::Node(url) => url,
            Self::Cluster(nodes) => nodes.first().map_or("", String::as_str),
        }
    }

    /// True for a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

impl fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Node(url) => f.write_str(&redact_url(url)),
            Self::Cluster(nodes) => {
                let shown: Vec<String> = nodes.iter().map(|n| redact_url(n)).collect();
                write!(f, "cluster {}", shown.join(","))
            }
        }
    }
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisTarget({self})")
    }
}

/// A multiplexed connection to one node or to a cluster; cheap to clone.
#[derive(Clone)]
pub enum RedisConn {
    /// One node.
    Node(ConnectionManager),
    /// A cluster.
    Cluster(ClusterHandle),
}

/// The cluster connection, replaced by a fresh one when it keeps timing out: under a few
/// hundred requests in flight across a SIGKILLed master, the crate's connection was seen to
/// answer every later command with a timeout, also once the cluster was whole again
/// (`claims_in_flight_ride_out_a_killed_master`). A new connection starts from the seeds.
#[derive(Clone)]
pub struct ClusterHandle {
    client: Arc<ClusterClient>,
    current: Arc<RwLock<ClusterConnection>>,
    replacing: Arc<AtomicBool>,
    /// A seed URL whose scheme and credentials reach any node of the cluster.
    seed: Arc<str>,
}

impl ClusterHandle {
    fn get(&self) -> ClusterConnection {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// After a timeout: one replacement at a time, in the background, at most one per
    /// [`REPLACE_PAUSE`] (a failover times out many commands at once; one fresh
    /// connection is enough).
    fn replace_soon(&self) {
        if self.replacing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(REPLACE_PAUSE).await;
            match this.client.get_async_connection().await {
                Ok(fresh) => {
                    *this
                        .current
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
                    tracing::warn!("redis cluster connection timed out; replaced by a fresh one");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "replacing the redis cluster connection failed")
                }
            }
            this.replacing.store(false, Ordering::Release);
        });
    }
}

/// The least time between two replacements of a timed-out cluster connection.
const REPLACE_PAUSE: Duration = Duration::from_secs(1);

/// How long a command may take before it counts as failed (a paused or dead server).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

impl RedisConn {
    /// Connects to `target`.
    pub async fn open(target: &RedisTarget) -> RedisResult<Self> {
        match target {
            RedisTarget::Node(url) => {
                let client = redis::Client::open(without_nagle(url)?)?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(RESPONSE_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(2);
                Ok(Self::Node(
                    ConnectionManager::new_with_config(client, config).await?,
                ))
            }
            RedisTarget::Cluster(nodes) => {
                // A failover takes the cluster a few seconds (node timeout + election); the
                // client retries with backoff meanwhile, refreshing its slot map, so a
                // command either lands on the new master or fails as "outcome unknown".
                let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .connection_timeout(RESPONSE_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    .retries(6)
                    .min_retry_wait(50)
                    .max_retry_wait(1000)
                    .tcp_settings(no_nagle())
                    .build()?;
                let seed = nodes.first().map_or("redis://", String::as_str);
                let conn = client.get_async_connection().await?;
                Ok(Self::Cluster(ClusterHandle {
                    client: Arc::new(client),
                    current: Arc::new(RwLock::new(conn)),
                    replacing: Arc::new(AtomicBool::new(false)),
                    seed: seed.into(),
                }))
            }
        }
    }

    /// The identity of the Redis the engine's state lives in: another one means a restart
    /// or a failover, and with it possibly stale state. One node: its `run_id`. A cluster:
    /// the sorted `run_id`s of the masters that own slots, each by its own answer (its
    /// `myself` line and `INFO server`), not by one member's gossip: a `fail?` flag is one
    /// node's opinion, and under a partial partition it flipped the identity back and forth,
    /// each flip a rebuild of every template. A master that must answer and does not makes
    /// the identity unknown (an error), never a smaller set; a master without slots does not
    /// count (adding one moves no data).
    pub async fn identity(&mut self) -> RedisResult<String> {
        let seed = match self {
            Self::Node(c) => return run_id(&info_server(c).await?),
            Self::Cluster(h) => h.seed.clone(),
        };
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(self).await?;
        let (must, may) = super::cluster_nodes::identity_candidates(&nodes);
        let mut selves = Vec::new();
        for (addr, required) in must
            .iter()
            .map(|a| (a, true))
            .chain(may.iter().map(|a| (a, false)))
        {
            match own_view(&seed, addr).await {
                Ok(Some(me)) => selves.push(me),
                Ok(None) => {}
                Err(e) if required => return Err(e),
                Err(e) => tracing::debug!(%addr, error = %e, "a replica did not answer"),
            }
        }
        let owners = super::cluster_nodes::slot_owners(selves);
        Ok(format!("cluster:{}", owners.join(",")))
    }

    /// Loads `scripts` on the node, or on each master of a cluster (those a node lists now)
    /// over a connection of its own. Not on replicas, as the cluster client's `SCRIPT LOAD`
    /// would: a promoted replica must answer NOSCRIPT, the sign that has it checked before
    /// it admits anything (`service/identity.rs`).
    pub async fn load_on_masters(&mut self, scripts: &[&redis::Script]) -> RedisResult<()> {
        let seed = match self {
            Self::Node(c) => {
                for s in scripts {
                    s.load_async(c).await?;
                }
                return Ok(());
            }
            Self::Cluster(h) => h.seed.clone(),
        };
        for addr in self.cluster_masters().await? {
            let mut node = node_connection(&seed, &addr).await?;
            for s in scripts {
                s.load_async(&mut node).await?;
            }
        }
        Ok(())
    }

    /// The addresses (`host:port`) of the masters of a cluster that are not marked failed;
    /// empty for one node.
    pub async fn cluster_masters(&mut self) -> RedisResult<Vec<String>> {
        if let Self::Node(_) = self {
            return Ok(Vec::new());
        }
        let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(self).await?;
        Ok(super::cluster_nodes::live_masters(&nodes))
    }
}

/// Connection settings for `url` with Nagle's algorithm off (redis-rs leaves it on). A
/// multiplexed connection has many commands in flight, and with Nagle on each small write
/// waits for the server's answer to the one before it: a claim's step through Redis took
/// 0.41–0.50 ms at the median with it, 0.36–0.38 without (docs/speed-log.md, 2026-12-04
/// night).
fn without_nagle(url: &str) -> RedisResult<redis::ConnectionInfo> {
    Ok(redis::IntoConnectionInfo::into_connection_info(url)?.set_tcp_settings(no_nagle()))
}

fn no_nagle() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

async fn info_server<C: ConnectionLike>(c: &mut C) -> RedisResult<String> {
    redis::cmd("INFO").arg("server").query_async(c).await
}

/// A plain connection to the cluster node at `addr` (`host:port`), with `seed`'s scheme and
/// credentials.
async fn node_connection(seed: &str, addr: &str) -> RedisResult<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(without_nagle(&node_url(seed, addr))?)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(RESPONSE_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// `seed` with its `host:port` replaced by `addr`.
fn node_url(seed: &str, addr: &str) -> String {
    let (scheme, rest) = seed.split_once("://").unwrap_or(("redis", seed));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let creds = authority.rsplit_once('@').map(|(c, _)| c);
    match creds {
        Some(c) => format!("{scheme}://{c}@{addr}/{path}"),
        None => format!("{scheme}://{addr}/{path}"),
    }
}

/// What the node at `addr` says of itself (its `myself` line) and its `run_id`.
async fn own_view(
    seed: &str,
    addr: &str,
) -> RedisResult<Option<(super::cluster_nodes::ClusterNode, String)>> {
    let mut node = node_connection(seed, addr).await?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut node)
        .await?;
    let Some(me) = super::cluster_nodes::parse(&nodes)
        .into_iter()
        .find(|n| n.myself)
    else {
        return Ok(None);
    };
    Ok(Some((me, run_id(&info_server(&mut node).await?)?)))
}

fn run_id(info: &str) -> RedisResult<String> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
        .ok_or_else(|| bad("INFO server has no run_id"))
}

fn bad(what: &str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        what.to_owned(),
    ))
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Node(c) => c.req_packed_command(cmd),
            Self::Cluster(h) => {
                let (mut conn, h) = (h.get(), h.clone());
                Box::pin(async move {
                    let reply = conn.req_packed_command(cmd).await;
                    if reply.as_ref().is_err_and(RedisError::is_timeout) {
                        h.replace_soon();
                    }
                    reply
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(h) => {
                let (mut conn, h) = (h.get(), h.clone());
                Box::pin(async move {
                    let reply = conn.req_packed_commands(pipeline, offset, count).await;
                    if reply.as_ref().is_err_and(RedisError::is_timeout) {
                        h.replace_soon();
                    }
                    reply
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Node(c) => c.get_db(),
            Self::Cluster(h) => h.get().get_db(),
        }
    }
}

/// Deletes every key matching `pattern` on one server with SCAN + UNLINK; returns how many.
/// Each key is unlinked by its own command (pipelined), so it also works on one node of a
/// cluster, which refuses a multi-key command across slots.
pub async fn delete_matching_on<C: ConnectionLike>(
    conn: &mut C,
    pattern: &str,
) -> RedisResult<usize> {
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            deleted += keys.len();
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("UNLINK").arg(k).ignore();
            }
            pipe.query_async::<()>(conn).await?;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

/// Deletes every key matching `pattern` wherever it lives: on one node, or on every master
/// of a cluster (SCAN is per node, so each master is scanned over a connection of its own).
pub async fn delete_matching(conn: &mut RedisConn, pattern: &str) -> RedisResult<usize> {
    let seed = match conn {
        RedisConn::Node(c) => return delete_matching_on(c, pattern).await,
        RedisConn::Cluster(h) => h.seed.clone(),
    };
    let mut deleted = 0;
    for addr in conn.cluster_masters().await? {
        let mut node = node_connection(&seed, &addr).await?;
        deleted += delete_matching_on(&mut node, pattern).await?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_target_reads_a_comma_separated_list() {
        let t = RedisTarget::cluster_from_list("redis://a:1/, redis://b:2/,");
        assert_eq!(
            t,
            RedisTarget::Cluster(vec!["redis://a:1/".into(), "redis://b:2/".into()])
        );
        assert_eq!(t.first_url(), "redis://a:1/");
        assert!(t.is_cluster());
    }

    #[test]
    fn node_urls_keep_the_seed_scheme_and_credentials() {
        assert_eq!(
            node_url("redis://u:p@10.0.0.1:7000/", "10.0.0.2:7001"),
            "redis://u:p@10.0.0.2:7001/"
        );
        assert_eq!(
            node_url("rediss://10.0.0.1:7000", "10.0.0.2:7001"),
            "rediss://10.0.0.2:7001/"
        );
    }
}
