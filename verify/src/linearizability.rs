//! Linearizability checker: a Wing–Gong search with Lowe's memoisation, as in Porcupine,
//! over any sequential [`Model`], run per partition.
//!
//! The engine's model is one implementation (in the property tests, beside the sequential
//! model it wraps: I8, docs/ARCHITECTURE.md, "Invariants"); the models of published Jepsen,
//! Porcupine and Knossos histories are others ([`crate::histories`]).
//!
//! Three rules keep the search small without losing linearizations: an operation that fits
//! and changes nothing (a refusal, a read, an idempotent repeat) is placed at once without
//! trying alternatives, since anything placed before it could as well come after; outcomes
//! that certainly had no effect but that the model need not predict are left out
//! ([`Model::no_effect`]); and model states are interned with their transitions cached, so
//! each distinct state is stepped and copied once however many paths reach it.

mod budget;
mod counterexample;
mod explain;
mod fxhash;
mod links;
mod model;
mod search;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use budget::{Budget, DEFAULT_MAX_MEMORY, Limit};
pub use counterexample::{Counterexample, OpView};
pub use model::{Completion, Model, OpOf, TimedOp, Whole};

use budget::{Exhausted, Meter};
use search::{Progress, Search};

/// The answer of a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Some order of the operations explains every recorded answer.
    Linearizable,
    /// No order does: I8 is violated.
    NotLinearizable {
        /// The longest linearizable prefix found and the operation that could not follow it.
        explanation: String,
        /// The same as data, for a page to draw.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counterexample: Option<Box<Counterexample>>,
    },
    /// The budget ran out (or the history was malformed): nothing is proven either way.
    Undecided {
        /// Why no verdict was reached.
        reason: String,
        /// Which budget ended the search (`None`: no budget, e.g. a malformed history).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<Limit>,
    },
}

impl Verdict {
    /// True only for [`Verdict::Linearizable`].
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable)
    }

    /// The verdict as a composed result says it: an undecided search is unknown.
    pub fn validity(&self) -> crate::validity::Validity {
        use crate::validity::Validity;
        match self {
            Verdict::Linearizable => Validity::Valid,
            Verdict::NotLinearizable { .. } => Validity::Invalid,
            Verdict::Undecided { .. } => Validity::Unknown,
        }
    }
}

/// Checks the operations of one partition against `model`, starting from `init`.
pub fn check_from<M: Model>(model: &M, ops: &[OpOf<M>], init: M::State, budget: Budget) -> Verdict {
    check_parts(
        model,
        vec![(String::new(), ops.iter().collect(), init)],
        budget,
    )
}

/// Checks a whole history, each partition on its own (an operation only touches its
/// partition's state), under one shared budget.
///
/// The partitions' searches take turns, a slice of work each, and the first violation ends
/// the check, naming its partition: one partition with a violation that is slow to prove
/// must not hide another that is quick to. Otherwise the history is linearizable when every
/// partition is, and undecided when the budget runs out first.
pub fn check_history<M: Model>(model: &M, ops: &[OpOf<M>], budget: Budget) -> Verdict {
    let mut parts: BTreeMap<M::Key, Vec<&OpOf<M>>> = BTreeMap::new();
    for op in ops {
        parts
            .entry(model.partition(&op.input))
            .or_default()
            .push(op);
    }
    let parts = parts
        .into_iter()
        .map(|(key, ops)| {
            let init = model.init(&key);
            (key.to_string(), ops, init)
        })
        .collect();
    check_parts(model, parts, budget)
}

/// Placements one partition's search may try before the next one's turn.
const SLICE: u64 = 2_048;

/// A partition: its name (empty when the history is one partition), its operations and
/// the state it starts in.
type Part<'a, M> = (String, Vec<&'a OpOf<M>>, <M as Model>::State);

fn check_parts<M: Model>(model: &M, parts: Vec<Part<'_, M>>, budget: Budget) -> Verdict {
    let mut meter = Meter::new(budget);
    let mut active = Vec::new();
    for (label, mut ops, init) in parts {
        ops.retain(|op| {
            op.completion
                .as_ref()
                .is_none_or(|c| !model.no_effect(&op.input, &c.output))
        });
        ops.sort_by_key(|op| op.call);
        if let Some(why) = model.refute(&ops) {
            return Verdict::NotLinearizable {
                counterexample: Some(Box::new(counterexample::refuted::<M>(&label, &ops))),
                explanation: match label.as_str() {
                    "" => why,
                    _ => format!("{label}: {why}"),
                },
            };
        }
        active.push((label, Search::new(model, ops), Some(init)));
    }
    while !active.is_empty() {
        let mut turn = 0;
        while turn < active.len() {
            let others = active.len() - 1;
            let (label, search, init) = &mut active[turn];
            let progress = match init.take() {
                Some(init) => search.start(init, &mut meter),
                None => search.resume(&mut meter, SLICE),
            };
            let named = |text: String| match label.as_str() {
                "" => text,
                _ => format!("{label}: {text}"),
            };
            match progress {
                Ok(Progress::Paused) => turn += 1,
                Ok(Progress::Linearizable) => {
                    active.remove(turn);
                }
                Ok(Progress::NotLinearizable) => {
                    return Verdict::NotLinearizable {
                        explanation: named(search.explain()),
                        counterexample: Some(Box::new(search.counterexample(label))),
                    };
                }
                Err(Exhausted { limit, reason }) => {
                    let reason = match others {
                        0 => reason,
                        _ => format!("{reason} ({others} other partitions unfinished too)"),
                    };
                    return Verdict::Undecided {
                        reason: named(reason),
                        limit: Some(limit),
                    };
                }
            }
        }
    }
    Verdict::Linearizable
}
