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
}

impl ClusterNode {
    /// True if it serves `slot`.
    pub fn serves(&self, slot: i64) -> bool {
        self.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
    }
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
    fn live_masters_leave_out_failed_and_suspected_ones() {
        assert_eq!(live_masters(NODES), ["127.0.0.1:7001", "127.0.0.1:7005"]);
    }
}
