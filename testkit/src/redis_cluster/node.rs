//! One node of a [`super::LocalCluster`]: the arguments of its `redis-server` (cluster mode,
//! the replication user, the short node timeout; the process is started as a single server's
//! is) and the synchronous queries the cluster's waits poll it with (`INFO` fields, `CLUSTER
//! NODES`). Apart from the cluster file, which is about the cluster as a whole: joining,
//! failing over, and waiting until the nodes agree.

use std::{path::Path, time::Duration};

use redis::{ConnectionLike, FromRedisValue};

use crate::{
    ProvisionError,
    process::ServerProcess,
    redis_server::{RedisPersistence, spawn_redis_server},
};
use coupon_engine::store::cluster_nodes::{self, ClusterNode};

/// The ACL user replicas authenticate to their master as.
pub(super) const REPL_USER: &str = "repl";
const REPL_PASSWORD: &str = "coupon-testkit-repl";
/// Short, so a failover takes a couple of seconds; long enough that a busy 2-core machine
/// does not fail nodes over by itself.
const NODE_TIMEOUT_MS: u64 = 1000;

pub(super) fn view_from(port: u16) -> Result<Vec<ClusterNode>, ProvisionError> {
    let text: String = query(&mut connect(port)?, redis::cmd("CLUSTER").arg("NODES"))?;
    Ok(cluster_nodes::parse(&text))
}

/// A master the cluster has not failed (it may still be suspected by some).
pub(super) fn is_master(n: &ClusterNode) -> bool {
    n.master && !n.failed
}

pub(super) fn connect(port: u16) -> Result<redis::Connection, ProvisionError> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(ProvisionError::local)?;
    let c = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(|e| ProvisionError::local(format!(":{port}: {e}")))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(ProvisionError::local)?;
    Ok(c)
}

pub(super) fn query<T: FromRedisValue>(
    c: &mut redis::Connection,
    cmd: &mut redis::Cmd,
) -> Result<T, ProvisionError> {
    let value = c.req_command(cmd).map_err(ProvisionError::local)?;
    redis::from_redis_value(value).map_err(ProvisionError::local)
}

pub(super) fn info_like(port: u16, cmd: &str, arg: &str) -> Result<String, ProvisionError> {
    query(&mut connect(port)?, redis::cmd(cmd).arg(arg))
}

pub(super) fn info_field(
    port: u16,
    section: &str,
    name: &str,
) -> Result<Option<String>, ProvisionError> {
    Ok(field(&info_like(port, "INFO", section)?, name))
}

pub(super) fn field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim().to_owned())
    })
}

/// Starts the node's `redis-server` in cluster mode (see [`spawn_redis_server`]).
pub(super) fn spawn(
    port: u16,
    bus: u16,
    announced_bus: Option<u16>,
    dir: &Path,
    persistence: RedisPersistence,
) -> Result<ServerProcess, ProvisionError> {
    let mut extra = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus.to_string(),
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        // A replica may always take over, however long it was cut off: the lagging
        // promotion is a fault this cluster exists to produce.
        "--cluster-replica-validity-factor",
        "0",
        "--masteruser",
        REPL_USER,
        "--masterauth",
        REPL_PASSWORD,
        "--user",
        REPL_USER,
        "on",
        &format!(">{REPL_PASSWORD}"),
        "+@all",
        "~*",
        // A replica that lost its link (revived, or the old master after a takeover) resyncs
        // at once instead of after the default 5 s.
        "--repl-diskless-sync-delay",
        "0",
    ]
    .map(String::from)
    .to_vec();
    if let Some(p) = announced_bus {
        // Its peers reach its bus through a fault proxy on this port.
        extra.extend(["--cluster-announce-bus-port".into(), p.to_string()]);
    }
    spawn_redis_server(port, dir, persistence, &extra)
}
