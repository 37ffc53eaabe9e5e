//! Resharding one slot of a [`LocalCluster`] to another master, the way an operator (or
//! `redis-cli --cluster reshard`) does it: `CLUSTER SETSLOT … IMPORTING` on the target and
//! `MIGRATING` on the source, `MIGRATE … KEYS` a few keys at a time, then `SETSLOT … NODE`
//! on every master. `redis-cli --cluster reshard` cannot be used: it picks the slots it
//! moves itself, and a nemesis must move the one slot the hot template hashes to.
//!
//! Step by step, so that a test can hold the migration half-way (claims must be served
//! while the slot is migrating) and a nemesis can run it to the end in the background.

use std::time::{Duration, Instant};

use super::{LocalCluster, is_master, query};
use crate::ProvisionError;

/// How long one `MIGRATE` may take (ms), as `redis-cli --cluster reshard` gives it.
const MIGRATE_TIMEOUT_MS: u64 = 60_000;

/// A slot on its way from one master to another.
#[derive(Debug, Clone)]
pub struct SlotMigration {
    /// The slot.
    pub slot: u16,
    /// The port of the master giving it up.
    pub source: u16,
    /// The port of the master taking it.
    pub target: u16,
    source_id: String,
    target_id: String,
    masters: Vec<u16>,
}

/// What a finished migration did, for the nemesis log and the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Keys moved.
    pub keys: u64,
    /// From `SETSLOT … IMPORTING` to the last `SETSLOT … NODE`.
    pub took: Duration,
}

impl LocalCluster {
    /// Marks the slot `key` hashes to as migrating from its master to another master (the
    /// first other one by port). Nothing moves yet.
    pub fn begin_slot_migration(&self, key: &str) -> Result<SlotMigration, ProvisionError> {
        let (source, _) = self.owners(key)?;
        let mut c = self.any_live()?;
        let slot: u16 = query(&mut c, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))?;
        let view = self.view()?;
        let mut masters: Vec<_> = view
            .iter()
            .filter(|n| is_master(n) && !n.failed && !n.slots.is_empty())
            .collect();
        masters.sort_by_key(|n| n.port);
        let id_of = |port: u16| {
            masters
                .iter()
                .find(|n| n.port == port)
                .map(|n| n.id.clone())
                .ok_or_else(|| ProvisionError::local(format!("no master on :{port}")))
        };
        let target = masters
            .iter()
            .map(|n| n.port)
            .find(|&p| p != source)
            .ok_or_else(|| ProvisionError::local("no other master to migrate the slot to"))?;
        let m = SlotMigration {
            slot,
            source,
            target,
            source_id: id_of(source)?,
            target_id: id_of(target)?,
            masters: masters.iter().map(|n| n.port).collect(),
        };
        // The target first: a client sent there by ASK must find it importing.
        setslot(m.target, slot, &["IMPORTING", &m.source_id])?;
        setslot(m.source, slot, &["MIGRATING", &m.target_id])?;
        Ok(m)
    }
}

impl SlotMigration {
    /// Moves these keys (those still on the source; all of the slot's) in one `MIGRATE`.
    pub fn move_keys(&self, keys: &[String]) -> Result<(), ProvisionError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut c = super::connect(self.source)?;
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1")
            .arg(self.target)
            .arg("")
            .arg(0)
            .arg(MIGRATE_TIMEOUT_MS)
            .arg("KEYS")
            .arg(keys);
        // "NOKEY" when none of them was left on the source: nothing to do.
        let _: redis::Value = query(&mut c, &mut cmd)?;
        Ok(())
    }

    /// Moves up to `n` of the keys left on the source; returns how many it moved.
    pub fn step(&self, n: usize) -> Result<usize, ProvisionError> {
        let mut c = super::connect(self.source)?;
        let keys: Vec<String> = query(
            &mut c,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(n.max(1)),
        )?;
        self.move_keys(&keys)?;
        Ok(keys.len())
    }

    /// Moves every key left, `per_call` at a time, and hands the slot to the target on every
    /// master (the target first, then the source, then the others, as the Redis Cluster
    /// tutorial says).
    pub fn finish(&self, per_call: usize, began: Instant) -> Result<Migrated, ProvisionError> {
        let mut keys = 0u64;
        loop {
            let moved = self.step(per_call)?;
            if moved == 0 {
                break;
            }
            keys += moved as u64;
        }
        let mut order = vec![self.target, self.source];
        order.extend(
            self.masters
                .iter()
                .copied()
                .filter(|p| *p != self.target && *p != self.source),
        );
        for port in order {
            setslot(port, self.slot, &["NODE", &self.target_id])?;
        }
        Ok(Migrated {
            keys,
            took: began.elapsed(),
        })
    }
}

fn setslot(port: u16, slot: u16, args: &[&str]) -> Result<(), ProvisionError> {
    let mut c = super::connect(port)?;
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT").arg(slot).arg(args);
    let () = query(&mut c, &mut cmd)?;
    Ok(())
}
