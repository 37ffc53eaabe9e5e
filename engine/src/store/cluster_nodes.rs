//! The `CLUSTER NODES` reply, as the engine (which masters to ask for their identity, where
//! to scan) and the testkit (who owns a slot, who replicates whom) read it.

/// One node as a cluster member sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Node id.
    pub id: String,
    /// `host:port` clients connect to.
    pub addr: String,
    /// The port of `addr`.
    pub port: u16,
    /// Flagged `master`.
    pub master: bool,
    /// Flagged `fail` (the cluster agreed it is down).
    pub failed: bool,
    /// Flagged `fail?` (this member cannot reach it).
    pub suspected: bool,
    /// The master it replicates, if a replica.
    pub replica_of: Option<String>,
    /// Slot ranges it serves (inclusive).
    pub slots: Vec<(i64, i64)>,
    /// The line is the answering node's own (`myself`): what it says of itself.
    pub myself: bool,
    /// Its configuration epoch: of two nodes claiming a slot, the higher one owns it.
    pub config_epoch: u64,
}

impl ClusterNode {
    /// True if it serves `slot`.
    pub fn serves(&self, slot: i64) -> bool {
        self.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
    }

    fn overlaps(&self, other: &ClusterNode) -> bool {
        self.slots
            .iter()
            .any(|(a, b)| other.slots.iter().any(|(c, d)| a <= d && c <= b))
    }
}

/// Whom to ask for the cluster's identity, from one member's view: `must` answer (masters
/// with slots that the cluster has not agreed are down; a `fail?` is only this member's
/// opinion, so it is asked, not dropped), `may` answer (replicas, one of which may have
/// been promoted without this member knowing yet).
pub fn identity_candidates(reply: &str) -> (Vec<String>, Vec<String>) {
    let (mut must, mut may) = (Vec::new(), Vec::new());
    for n in parse(reply).into_iter().filter(|n| !n.failed) {
        if n.master && !n.slots.is_empty() {
            must.push(n.addr);
        } else if !n.master {
            may.push(n.addr);
        }
    }
    (must, may)
}

/// The masters that own slots, each as it describes itself (its `myself` line) with its
/// `run_id`: a node that claims slots another claims with a higher configuration epoch
/// has lost them (a master cut off while its replica was promoted) and is left out, as are
/// masters without slots (an empty master added does not change what holds the data).
pub fn slot_owners(selves: Vec<(ClusterNode, String)>) -> Vec<String> {
    let mut owners: Vec<String> = selves
        .iter()
        .filter(|(n, _)| n.master && !n.slots.is_empty())
        .filter(|(n, _)| {
            !selves.iter().any(|(other, _)| {
                other.master && other.config_epoch > n.config_epoch && other.overlaps(n)
            })
        })
        .map(|(_, run_id)| run_id.clone())
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

/// Every node of a `CLUSTER NODES` reply (lines it cannot read are skipped).
pub fn parse(reply: &str) -> Vec<ClusterNode> {
    reply.lines().filter_map(parse_line).collect()
}

/// `host:port` of the masters neither failed nor suspected.
pub fn live_masters(reply: &str) -> Vec<String> {
    parse(reply)
        .into_iter()
        .filter(|n| n.master && !n.failed && !n.suspected)
        .map(|n| n.addr)
        .collect()
}

fn parse_line(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let addr = f.get(1)?.split(['@', ',']).next()?;
    let port = addr.rsplit(':').next()?.parse().ok()?;
    let flags: Vec<&str> = f.get(2)?.split(',').collect();
    let slots = f
        .iter()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|x| (x, x)),
        })
        .collect();
    // A node that never got an address (`:0`) cannot be reached.
    if addr.starts_with(':') {
        return None;
    }
    Some(ClusterNode {
        id: (*f.first()?).to_owned(),
        addr: addr.to_owned(),
        port,
        master: flags.contains(&"master"),
        failed: flags.contains(&"fail"),
        suspected: flags.contains(&"fail?"),
        replica_of: f.get(3).filter(|m| **m != "-").map(|m| (*m).to_owned()),
        slots,
        myself: flags.contains(&"myself"),
        config_epoch: f.get(6).and_then(|e| e.parse().ok()).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 7000
a2 127.0.0.1:7002@17002 master,fail? - 0 0 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master,fail - 0 0 3 disconnected
a4 127.0.0.1:7004@17004 slave a1 0 0 1 connected
a5 127.0.0.1:7005@17005,host master - 0 0 5 connected 10923-16383
";

    #[test]
    fn lines_are_read() {
        let n = parse(NODES);
        assert_eq!(n.len(), 5);
        assert_eq!(n[0].port, 7001);
        assert!(n[0].master && n[0].serves(7000) && n[0].serves(42) && !n[0].serves(6000));
        assert_eq!(n[3].replica_of.as_deref(), Some("a1"));
        assert!(n[2].failed && n[1].suspected);
        assert_eq!(n[4].addr, "127.0.0.1:7005");
    }

    #[test]
    fn identity_asks_suspected_masters_and_replicas_but_not_failed_ones() {
        let (must, may) = identity_candidates(NODES);
        assert_eq!(must, ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7005"]);
        assert_eq!(may, ["127.0.0.1:7004"]);
    }

    fn own(line: &str, run_id: &str) -> (ClusterNode, String) {
        let node = parse_line(line).unwrap_or_else(|| panic!("unreadable: {line}"));
        (node, run_id.to_owned())
    }

    #[test]
    fn the_slot_owner_with_the_higher_config_epoch_wins_and_empty_masters_do_not_count() {
        let selves = vec![
            own(
                "a1 127.0.0.1:7001@1 myself,master - 0 0 1 connected 0-8000",
                "r1",
            ),
            // a1's replica, promoted while a1 was cut off: a1 still claims its slots.
            own(
                "a4 127.0.0.1:7004@1 myself,master - 0 0 7 connected 0-8000",
                "r4",
            ),
            own(
                "a2 127.0.0.1:7002@1 myself,master - 0 0 2 connected 8001-16383",
                "r2",
            ),
            own("a6 127.0.0.1:7006@1 myself,master - 0 0 8 connected", "r6"),
            own("a5 127.0.0.1:7005@1 myself,slave a2 0 0 2 connected", "r5"),
        ];
        assert_eq!(slot_owners(selves), ["r2", "r4"]);
    }

    #[test]
    fn live_masters_leave_out_failed_and_suspected_ones() {
        assert_eq!(live_masters(NODES), ["127.0.0.1:7001", "127.0.0.1:7005"]);
    }
}
