//! A Redis Cluster of this process's own: 3 masters and 3 replicas from the machine's
//! `redis-server`, on free loopback ports in temp dirs, created with
//! `redis-cli --cluster create` and killed (by pid) on drop. The failover faults act on it:
//! SIGKILL of the master owning a slot (its replica takes over), and `CLUSTER FAILOVER
//! TAKEOVER` on a replica whose replication was cut (a lagging replica promoted).
//!
//! Replicas authenticate to their master as the ACL user `repl`; cutting replication turns
//! that user off on the master and kills its links, so the replica cannot catch up until
//! [`LocalCluster::restore_replication`].
//!
//! The node level (spawning a `redis-server` in cluster mode, the per-node queries the waits
//! poll) is in `redis_cluster/node.rs`, so that this file is about the cluster as a whole.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    ProvisionError,
    host::{find_binary, free_ports, wait_for_port},
    process::ServerProcess,
    redis_server::RedisPersistence,
};
use coupon_engine::store::{cluster_nodes::ClusterNode, redis_conn::RedisTarget};

mod bus;
mod node;
mod slot_migration;

pub use slot_migration::{Migrated, SlotMigration};

use node::{REPL_USER, connect, field, info_field, info_like, is_master, query, spawn, view_from};

const MASTERS: usize = 3;
const WAIT: Duration = Duration::from_secs(30);
/// `redis-cli --cluster create` waits for the nodes to agree with no deadline of its own.
const CREATE_WAIT: Duration = Duration::from_secs(60);

/// One node: its process (None while killed), client and bus ports, and data dir.
#[derive(Debug)]
struct Node {
    child: Option<ServerProcess>,
    port: u16,
    bus: u16,
    dir: tempfile::TempDir,
    /// The fault proxy its peers reach its bus through, when the cluster has them
    /// ([`LocalCluster::start_with_bus_proxies`]).
    bus_proxy: Option<crate::fault_proxy::FaultProxy>,
}

impl Node {
    /// The bus port the node announces: its proxy's, if it has one.
    fn announced_bus(&self) -> Option<u16> {
        self.bus_proxy.as_ref().map(|p| p.addr().port())
    }
}

/// What a failover did, for the nemesis log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// The port of the master that lost its slots.
    pub old_master: u16,
    /// The port of the replica promoted in its place.
    pub new_master: u16,
}

/// A cluster of 3 masters + 3 replicas this process started; killed on drop.
#[derive(Debug)]
pub struct LocalCluster {
    nodes: Vec<Node>,
    persistence: RedisPersistence,
}

impl LocalCluster {
    /// Starts 6 nodes, joins them into a cluster with one replica per master, and waits until
    /// every node reports `cluster_state:ok` and every replica is in sync.
    pub fn start(persistence: RedisPersistence) -> Result<Self, ProvisionError> {
        Self::start_trying(persistence, false)
    }

    /// [`Self::start`], each node's peers reaching its bus through a fault proxy of its own
    /// (the node announces the proxy's port), so that a node's bus can be partitioned
    /// ([`Self::hold_bus_of`]).
    pub fn start_with_bus_proxies(persistence: RedisPersistence) -> Result<Self, ProvisionError> {
        Self::start_trying(persistence, true)
    }

    fn start_trying(persistence: RedisPersistence, proxies: bool) -> Result<Self, ProvisionError> {
        // Another process may take a free port before redis-server binds it: try again on
        // other ports (the nodes already started are killed on drop).
        let mut last = None;
        for _ in 0..3 {
            match Self::start_once(persistence, proxies) {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ProvisionError::local("cluster not started")))
    }

    fn start_once(persistence: RedisPersistence, proxies: bool) -> Result<Self, ProvisionError> {
        let mut cluster = Self {
            nodes: Vec::new(),
            persistence,
        };
        // The bus ports are chosen too: the default (port + 10000) may not exist.
        let ports = free_ports(MASTERS * 4)?;
        for pair in ports.chunks(2) {
            let dir = tempfile::tempdir().map_err(ProvisionError::local)?;
            let (port, bus) = (pair[0], pair[1]);
            let bus_proxy = if proxies {
                Some(crate::fault_proxy::FaultProxy::start(&format!(
                    "127.0.0.1:{bus}"
                ))?)
            } else {
                None
            };
            let announced = bus_proxy.as_ref().map(|p| p.addr().port());
            let child = spawn(port, bus, announced, dir.path(), persistence)?;
            cluster.nodes.push(Node {
                child: Some(child),
                port,
                bus,
                dir,
                bus_proxy,
            });
        }
        for n in &mut cluster.nodes {
            wait_for_port(n.port, Duration::from_secs(10))?;
            // Something answering is not enough: if this node lost its port to another
            // process, the answer came from that process's server.
            if let Some(child) = n.child.as_mut()
                && let Some(status) = child.exited()
            {
                return Err(ProvisionError::local(format!(
                    "redis-server on :{} exited ({status}); its ports were taken",
                    n.port
                )));
            }
        }
        let cli = find_binary("redis-cli")
            .ok_or_else(|| ProvisionError::Local("redis-cli not found in PATH".into()))?;
        let mut create = Command::new(cli);
        create
            .arg("--cluster")
            .arg("create")
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port)),
            )
            .args(["--cluster-replicas", "1", "--cluster-yes"]);
        run_within(&mut create, CREATE_WAIT)?;
        cluster.wait_healthy()?;
        Ok(cluster)
    }

    /// Seed node URLs (every node).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect()
    }

    /// The cluster as a target for the engine.
    pub fn target(&self) -> RedisTarget {
        RedisTarget::Cluster(self.seeds())
    }

    /// Process ids of the running nodes.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter_map(|n| n.child.as_ref().and_then(ServerProcess::id))
            .collect()
    }

    /// The port of the master owning `key`'s slot, and of its replica (None while it has
    /// none, e.g. after a failover until the old master rejoins).
    pub fn owners(&self, key: &str) -> Result<(u16, Option<u16>), ProvisionError> {
        let mut c = self.any_live()?;
        let slot: i64 = query(&mut c, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))?;
        let view = self.view()?;
        let master = view
            .iter()
            .find(|n| is_master(n) && n.serves(slot))
            .ok_or_else(|| ProvisionError::local(format!("no master owns slot {slot}")))?;
        let replica = view
            .iter()
            .find(|n| n.replica_of.as_deref() == Some(master.id.as_str()))
            .map(|r| r.port);
        Ok((master.port, replica))
    }

    /// [`Self::owners`] when the master must have a replica. Waits for one: on a busy
    /// machine a node may have failed over by itself, and its old master rejoins as the
    /// new one's replica a moment later.
    fn master_and_replica(&self, key: &str) -> Result<(u16, u16), ProvisionError> {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.owners(key)? {
                (master, Some(replica)) => return Ok((master, replica)),
                (master, None) if Instant::now() >= deadline => {
                    return Err(ProvisionError::local(format!(
                        "master :{master} has had no replica for {WAIT:?}"
                    )));
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// SIGKILLs the master owning `key`'s slot and waits until its replica has taken over
    /// and the cluster is ok again; the killed node stays down until [`Self::revive`].
    pub fn kill_master_of(&mut self, key: &str) -> Result<Failover, ProvisionError> {
        let (master, replica) = self.master_and_replica(key)?;
        let node = self.node_mut(master)?;
        if let Some(mut child) = node.child.take() {
            child.kill();
        }
        self.wait_master(replica)?;
        self.wait_state_ok()?;
        Ok(Failover {
            old_master: master,
            new_master: replica,
        })
    }

    /// Restarts every killed node on its port and dir: it rejoins (from `nodes.conf`) as a
    /// replica of whoever took its slots, and resyncs from it.
    pub fn revive(&mut self) -> Result<(), ProvisionError> {
        let persistence = self.persistence;
        let mut revived = Vec::new();
        for n in &mut self.nodes {
            if n.child.is_none() {
                n.child = Some(spawn(
                    n.port,
                    n.bus,
                    n.announced_bus(),
                    n.dir.path(),
                    persistence,
                )?);
                wait_for_port(n.port, Duration::from_secs(10))?;
                revived.push(n.port);
            }
        }
        // It starts as the master it was (nodes.conf) until gossip tells it otherwise.
        for port in revived {
            self.wait_replica(port)?;
        }
        self.wait_healthy()
    }

    /// Waits until every live node sees the node at `port` as a replica and its link is up.
    fn wait_replica(&self, port: u16) -> Result<(), ProvisionError> {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let seen = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                view_from(n.port)
                    .is_ok_and(|v| v.iter().any(|x| x.port == port && x.replica_of.is_some()))
            });
            if seen
                && info_field(port, "replication", "master_link_status")?.as_deref() == Some("up")
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProvisionError::local(format!(
            ":{port} did not rejoin as a replica within {WAIT:?}"
        )))
    }

    /// Cuts the replication of the replica of `key`'s master: the master refuses its
    /// replication user and drops its links, so the replica falls behind. Returns the
    /// replica's port.
    ///
    /// The replica first catches up with everything the master has written, so that what it
    /// misses is exactly what is written after the cut (replication is asynchronous: on a
    /// busy machine a replica cut at once could miss the key altogether).
    pub fn cut_replication(&self, key: &str) -> Result<u16, ProvisionError> {
        let (master, replica) = self.master_and_replica(key)?;
        wait_caught_up(master, replica)?;
        let mut m = connect(master)?;
        query::<()>(
            &mut m,
            redis::cmd("ACL").arg("SETUSER").arg(REPL_USER).arg("off"),
        )?;
        query::<i64>(
            &mut m,
            redis::cmd("CLIENT").arg("KILL").arg("USER").arg(REPL_USER),
        )?;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if info_field(replica, "replication", "master_link_status")?.as_deref() == Some("down")
            {
                return Ok(replica);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(ProvisionError::local(format!(
            "replica :{replica} kept its link"
        )))
    }

    /// `CLUSTER FAILOVER TAKEOVER` on the replica at `port` (which may lag): it takes its
    /// master's slots without the master's agreement; the old master turns into its replica
    /// and drops whatever it had that the new one lacks.
    pub fn takeover(&self, port: u16) -> Result<Failover, ProvisionError> {
        let view = self.view()?;
        let old_master = view
            .iter()
            .find(|n| n.port == port)
            .and_then(|n| n.replica_of.as_deref())
            .and_then(|id| view.iter().find(|m| m.id == id))
            .map(|m| m.port)
            .ok_or_else(|| ProvisionError::local(format!(":{port} is not a replica")))?;
        query::<()>(
            &mut connect(port)?,
            redis::cmd("CLUSTER").arg("FAILOVER").arg("TAKEOVER"),
        )?;
        self.wait_master(port)?;
        self.wait_state_ok()?;
        Ok(Failover {
            old_master,
            new_master: port,
        })
    }

    /// Lets replicas authenticate again (on every live node: roles may have flipped) and
    /// waits until every replica is in sync.
    pub fn restore_replication(&self) -> Result<(), ProvisionError> {
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            query::<()>(
                &mut connect(n.port)?,
                redis::cmd("ACL").arg("SETUSER").arg(REPL_USER).arg("on"),
            )?;
        }
        self.wait_healthy()
    }

    /// Starts one more node and adds it as a master without slots (`redis-cli --cluster
    /// add-node`), as an operator does before resharding onto it; waits until every live
    /// node lists it. Returns its port.
    pub fn add_empty_master(&mut self) -> Result<u16, ProvisionError> {
        let ports = free_ports(2)?;
        let (port, bus) = (ports[0], ports[1]);
        let dir = tempfile::tempdir().map_err(ProvisionError::local)?;
        let child = spawn(port, bus, None, dir.path(), self.persistence)?;
        self.nodes.push(Node {
            child: Some(child),
            port,
            bus,
            dir,
            bus_proxy: None,
        });
        wait_for_port(port, Duration::from_secs(10))?;
        let cli = find_binary("redis-cli")
            .ok_or_else(|| ProvisionError::Local("redis-cli not found in PATH".into()))?;
        let mut add = Command::new(cli);
        add.arg("--cluster")
            .arg("add-node")
            .arg(format!("127.0.0.1:{port}"))
            .arg(format!("127.0.0.1:{}", self.live_port()?));
        run_within(&mut add, CREATE_WAIT)?;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let known = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                view_from(n.port).is_ok_and(|v| v.iter().any(|x| x.port == port && is_master(x)))
            });
            if known {
                return self.wait_state_ok().map(|()| port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProvisionError::local(format!(
            "the new master :{port} was not known to every node within {WAIT:?}"
        )))
    }

    /// Waits until every live node says `cluster_state:ok`, the live nodes agree on 3
    /// masters with all 16384 slots, and every live replica's link is up.
    pub fn wait_healthy(&self) -> Result<(), ProvisionError> {
        self.wait_state_ok()?;
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        while Instant::now() < deadline {
            match self.replicas_in_sync() {
                Ok(true) => return Ok(()),
                Ok(false) => last = "a replica is not in sync".into(),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProvisionError::local(format!(
            "cluster not healthy within {WAIT:?}: {last}"
        )))
    }

    fn replicas_in_sync(&self) -> Result<bool, ProvisionError> {
        let live: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect();
        let mut replicas = Vec::new();
        for &port in &live {
            if info_field(port, "replication", "role")?.as_deref() == Some("slave") {
                if info_field(port, "replication", "master_link_status")?.as_deref() != Some("up") {
                    return Ok(false);
                }
                replicas.push(port);
            }
        }
        // Gossip lags a replica's own word: until every node lists it as a replica, a view
        // taken from one of them shows its master without one.
        for &port in &live {
            let view = view_from(port)?;
            let listed = |r: &u16| {
                view.iter()
                    .any(|x| x.port == *r && x.replica_of.is_some() && !x.failed)
            };
            if !replicas.iter().all(listed) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn wait_state_ok(&self) -> Result<(), ProvisionError> {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        while Instant::now() < deadline {
            let ok = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                match info_like(n.port, "CLUSTER", "INFO") {
                    Ok(info) => {
                        let ok = field(&info, "cluster_state").as_deref() == Some("ok")
                            && field(&info, "cluster_slots_ok").as_deref() == Some("16384");
                        if !ok {
                            last = format!(":{} {info}", n.port);
                        }
                        ok
                    }
                    Err(e) => {
                        last = e.to_string();
                        false
                    }
                }
            });
            if ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProvisionError::local(format!(
            "cluster_state not ok within {WAIT:?}: {last}"
        )))
    }

    /// Waits until the node at `port` is a master with slots, as every live node sees it.
    fn wait_master(&self, port: u16) -> Result<(), ProvisionError> {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let agreed = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                view_from(n.port).is_ok_and(|v| {
                    v.iter()
                        .any(|x| x.port == port && is_master(x) && !x.slots.is_empty())
                })
            });
            if agreed {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ProvisionError::local(format!(
            ":{port} did not become master within {WAIT:?}"
        )))
    }

    fn view(&self) -> Result<Vec<ClusterNode>, ProvisionError> {
        let port = self.live_port()?;
        view_from(port)
    }

    fn live_port(&self) -> Result<u16, ProvisionError> {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .map(|n| n.port)
            .ok_or_else(|| ProvisionError::local("no live cluster node"))
    }

    fn any_live(&self) -> Result<redis::Connection, ProvisionError> {
        connect(self.live_port()?)
    }

    fn node_mut(&mut self, port: u16) -> Result<&mut Node, ProvisionError> {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .ok_or_else(|| ProvisionError::local(format!("no node on :{port}")))
    }
}

/// Runs `cmd` to its end, killing it after `limit`; its output is in the error either way.
fn run_within(cmd: &mut Command, limit: Duration) -> Result<(), ProvisionError> {
    let out = tempfile::tempfile().map_err(ProvisionError::local)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(ProvisionError::local)?)
        .stderr(out.try_clone().map_err(ProvisionError::local)?)
        .spawn()
        .map_err(|e| ProvisionError::local(format!("{cmd:?}: {e}")))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(ProvisionError::local)? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    match status {
        Some(s) if s.success() => Ok(()),
        _ => {
            let printed = read_all(out);
            let ended = status.map_or_else(|| format!("killed after {limit:?}"), |s| s.to_string());
            Err(ProvisionError::local(format!(
                "{cmd:?}: {ended}: {printed}"
            )))
        }
    }
}

fn read_all(mut f: std::fs::File) -> String {
    use std::io::{Read, Seek};
    let mut s = String::new();
    let _ = f.rewind().and_then(|_| f.read_to_string(&mut s));
    s
}

/// Waits until the replica at `replica` has applied the master's replication stream up to
/// the offset the master had when this was called.
fn wait_caught_up(master: u16, replica: u16) -> Result<(), ProvisionError> {
    let offset = |port: u16, name: &str| -> Result<i64, ProvisionError> {
        info_field(port, "replication", name)?
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| ProvisionError::local(format!(":{port} reports no {name}")))
    };
    let target = offset(master, "master_repl_offset")?;
    let deadline = Instant::now() + WAIT;
    let mut seen = None;
    while Instant::now() < deadline {
        let up = info_field(replica, "replication", "master_link_status")?.as_deref() == Some("up");
        let at = offset(replica, "slave_repl_offset").ok();
        if up && at.is_some_and(|at| at >= target) {
            return Ok(());
        }
        seen = at;
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(ProvisionError::local(format!(
        "replica :{replica} at offset {seen:?} did not reach its master's {target} within {WAIT:?}"
    )))
}
