//! A violation as data, for a page to draw (`check-history --html`): the operations around
//! where the search got stuck, which of them form the longest linearizable prefix (in its
//! order), the operation that had to come next and none of whose orders fit, and the
//! candidates whose recorded answers the model contradicted there.

use serde::{Deserialize, Serialize};

use super::{
    model::{Model, OpOf},
    search::Search,
};

/// Prefix operations shown before the point where the search got stuck.
const PREFIX_SHOWN: usize = 40;
/// Most operations on a page (a long history is shown around its violation).
const MOST_SHOWN: usize = 400;

/// One operation as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpView {
    /// The client that ran it.
    pub process: u64,
    /// What it asked, as the model writes it.
    pub op: String,
    /// What the client saw, or `unknown`.
    pub recorded: String,
    /// Invocation time.
    pub call: u64,
    /// `None`: unknown outcome (open-ended).
    pub ret: Option<u64>,
}

/// The operations near a violation and what the search made of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counterexample {
    /// The partition (key) it happened in; empty for a whole history.
    pub partition: String,
    /// The operations shown, by call time.
    pub ops: Vec<OpView>,
    /// Indices into `ops` of the longest linearizable prefix's operations shown, in its order.
    pub prefix: Vec<usize>,
    /// How many prefix operations came before those shown.
    pub prefix_hidden: usize,
    /// The operation that had to come next (the first unplaced one to return).
    pub stuck: Option<usize>,
    /// Candidates whose recorded answer the model contradicted after the prefix.
    pub misfits: Vec<usize>,
    /// The model's state after the prefix.
    pub state: String,
}

fn view<M: Model>(op: &OpOf<M>) -> OpView {
    OpView {
        process: op.process,
        op: op.input.to_string(),
        recorded: op
            .completion
            .as_ref()
            .map_or_else(|| "unknown".into(), |c| c.output.to_string()),
        call: op.call,
        ret: op.ret(),
    }
}

/// The first [`MOST_SHOWN`] operations, as a counterexample without a search's findings
/// (a pre-check refuted the history; its explanation names the operation).
pub(super) fn refuted<M: Model>(partition: &str, ops: &[&OpOf<M>]) -> Counterexample {
    Counterexample {
        partition: partition.to_owned(),
        ops: ops
            .iter()
            .take(MOST_SHOWN)
            .map(|op| view::<M>(op))
            .collect(),
        prefix: Vec::new(),
        prefix_hidden: 0,
        stuck: None,
        misfits: Vec::new(),
        state: String::new(),
    }
}

impl<M: Model> Search<'_, M> {
    /// The deepest dead end as a counterexample, around where it happened.
    pub(super) fn counterexample(&self, partition: &str) -> Counterexample {
        let Some(end) = &self.deepest else {
            return refuted::<M>(partition, &self.ops);
        };
        let hidden = end.prefix.len().saturating_sub(PREFIX_SHOWN);
        let shown_prefix: Vec<usize> = end.prefix[hidden..].iter().map(|p| p.op).collect();
        let named: Vec<usize> = shown_prefix
            .iter()
            .copied()
            .chain(end.blocker)
            .chain(end.misfits.iter().copied())
            .collect();
        let from = named.iter().map(|&i| self.ops[i].call).min().unwrap_or(0);
        let to = named
            .iter()
            .map(|&i| self.ops[i].ret().unwrap_or(self.ops[i].call))
            .max()
            .unwrap_or(u64::MAX);
        // Every operation that overlaps the window, and every one named, within the cap.
        let mut keep: Vec<usize> = (0..self.ops.len())
            .filter(|&i| {
                let op = self.ops[i];
                op.call <= to && op.ret().is_none_or(|r| r >= from)
            })
            .collect();
        if keep.len() > MOST_SHOWN {
            keep.retain(|i| named.contains(i));
        }
        let position = |i: usize| keep.iter().position(|&k| k == i);
        Counterexample {
            partition: partition.to_owned(),
            ops: keep.iter().map(|&i| view::<M>(self.ops[i])).collect(),
            prefix: shown_prefix.iter().filter_map(|&i| position(i)).collect(),
            prefix_hidden: hidden,
            stuck: end.blocker.and_then(position),
            misfits: end.misfits.iter().filter_map(|&i| position(i)).collect(),
            state: self
                .states
                .get(end.state as usize)
                .map_or_else(String::new, |s| self.model.describe(s)),
        }
    }
}
