//! A sound pre-check for register histories, run before the search: every completed read
//! (and every applied compare-and-set, which reads its `from`) needs a *source* — the initial
//! value, or a write of that value — invoked before the read returned and not certainly
//! overwritten before the read was invoked. A source is certainly overwritten when a write
//! that completed (or a compare-and-set that applied) was invoked after the source returned
//! and returned before the read was invoked: whatever the order, it lies between the two.
//!
//! A read with no possible source is a violation no search needs to look for, and such
//! reads (a value no write had produced by then, a value certainly gone) are what makes a
//! large concurrent history slow to refute: the search would otherwise have to exhaust every
//! order of the operations before it. O(n log n).

use std::collections::HashMap;

use super::{Register, RegisterOp, RegisterSeen};
use crate::linearizability::OpOf;

type Op = OpOf<Register>;

/// What `op` sets the register to, if it may set it.
fn writes(op: &Op) -> Option<Option<i64>> {
    let seen = op.completion.as_ref().map(|c| c.output);
    match (op.input, seen) {
        (RegisterOp::Write(v), None | Some(RegisterSeen::Written)) => Some(Some(v)),
        (RegisterOp::Cas { to, .. }, None | Some(RegisterSeen::Cas(true))) => Some(Some(to)),
        _ => None,
    }
}

/// What `op` must have found in the register, if it completed and says.
fn needs(op: &Op) -> Option<Option<i64>> {
    match (op.input, op.completion.as_ref()?.output) {
        (RegisterOp::Read, RegisterSeen::Read(v)) => Some(v),
        (RegisterOp::Cas { from, .. }, RegisterSeen::Cas(true)) => Some(Some(from)),
        _ => None,
    }
}

/// A completed read (or applied compare-and-set) no source can explain, in words; `None`
/// when every one has a possible source (which proves nothing either way).
pub(super) fn refute(initial: Option<i64>, ops: &[&Op]) -> Option<String> {
    // Completed operations that certainly set the register, by call: (call, return).
    let mut overwrites: Vec<(u64, u64)> = ops
        .iter()
        .filter(|op| op.completion.is_some() && writes(op).is_some())
        .filter_map(|op| Some((op.call, op.ret()?)))
        .collect();
    overwrites.sort_unstable();
    // The earliest return among overwrites invoked at or after each position.
    let mut earliest_from = vec![u64::MAX; overwrites.len() + 1];
    for i in (0..overwrites.len()).rev() {
        earliest_from[i] = earliest_from[i + 1].min(overwrites[i].1);
    }
    // When a source is certainly overwritten: the earliest return of an overwrite invoked
    // after it returned (never, for a source of unknown outcome).
    let overwritten_by = |ret: Option<u64>| match ret {
        Some(ret) => earliest_from[overwrites.partition_point(|&(call, _)| call <= ret)],
        None => u64::MAX,
    };
    // Per value, its sources by call: (call, when certainly overwritten, index).
    let mut sources: HashMap<Option<i64>, Vec<(u64, u64, usize)>> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(v) = writes(op) {
            sources
                .entry(v)
                .or_default()
                .push((op.call, overwritten_by(op.ret()), i));
        }
    }
    // And over each prefix, the two sources overwritten last (a compare-and-set may be the
    // latest source of the value it reads, and is no source for itself).
    let mut latest: HashMap<Option<i64>, Vec<[(u64, usize); 2]>> = HashMap::new();
    for (v, list) in &mut sources {
        list.sort_unstable();
        let mut top = [(0, usize::MAX); 2];
        let tops = list
            .iter()
            .map(|&(_, gone, i)| {
                if gone > top[0].0 {
                    top = [(gone, i), top[0]];
                } else if gone > top[1].0 {
                    top[1] = (gone, i);
                }
                top
            })
            .collect();
        latest.insert(*v, tops);
    }
    let initial_gone = earliest_from[0];
    for (i, op) in ops.iter().enumerate() {
        let (Some(v), Some(ret)) = (needs(op), op.ret()) else {
            continue;
        };
        if v == initial && initial_gone > op.call {
            continue;
        }
        let list = sources.get(&v).map_or(&[][..], Vec::as_slice);
        // Sources invoked before it returned.
        let before = list.partition_point(|&(call, _, _)| call < ret);
        let alive = before > 0
            && latest.get(&v).is_some_and(|tops| {
                let [first, second] = tops[before - 1];
                let (gone, _) = if first.1 == i { second } else { first };
                gone > op.call
            });
        if !alive {
            let value = v.map_or_else(|| "nil".to_owned(), |v| v.to_string());
            let why = if before == 0 || list[..before].iter().all(|s| s.2 == i) {
                format!("no operation invoked before it returned could have written {value}")
            } else {
                format!(
                    "every write of {value} invoked before it returned was certainly \
                     overwritten before it was invoked"
                )
            };
            return Some(format!(
                "found before any search: {op}, recorded {}, cannot be placed: {why}",
                op.completion
                    .as_ref()
                    .map_or_else(String::new, |c| c.output.to_string())
            ));
        }
    }
    None
}
