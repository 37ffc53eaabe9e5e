//! Partitions of the cluster bus, the links nodes gossip and vote over. With
//! [`LocalCluster::start_with_bus_proxies`] every node announces a fault proxy's port as its
//! bus port, so its peers' links to it run through that proxy; holding it (a blackhole:
//! bytes kept, nothing reset) cuts the node off from its peers' pings while it still
//! reaches them over its own links and still serves clients — one-sided, as a partial
//! partition is. Redis counts any packet from a node, on either link, as a sign of life, so
//! its peers do not flag it, however long the hold (seen on redis-server 7.0: no takeover in
//! 30 s with a 1 s node timeout).

use super::LocalCluster;
use crate::{ProvisionError, fault_proxy::LinkMode};

impl LocalCluster {
    /// Holds every byte its peers send to the bus of the master owning `key`'s slot, until
    /// [`Self::release_buses`]. Returns that master's port.
    pub fn hold_bus_of(&self, key: &str) -> Result<u16, ProvisionError> {
        let (master, _) = self.owners(key)?;
        let node = self
            .nodes
            .iter()
            .find(|n| n.port == master)
            .ok_or_else(|| ProvisionError::local(format!("no node on :{master}")))?;
        let proxy = node
            .bus_proxy
            .as_ref()
            .ok_or_else(|| ProvisionError::local("this cluster was started without bus proxies"))?;
        proxy.set(LinkMode::Blackhole);
        Ok(master)
    }

    /// Lets every bus link through again.
    pub fn release_buses(&self) {
        for p in self.nodes.iter().filter_map(|n| n.bus_proxy.as_ref()) {
            p.set(LinkMode::Pass);
        }
    }
}
