//! The Wing–Gong search with Lowe's memoisation, as in Porcupine, over any [`Model`].
//!
//! The search places operations one at a time in an order that respects real time (an
//! operation may go next only if no unplaced operation returned before it was invoked), steps
//! the model, and keeps going while the model's answers match the recorded ones. A
//! configuration — the set of placed operations and the model state — is never explored
//! twice. Operations with an unknown outcome may take effect at any point after their call,
//! or never: they never block the search and need not be placed.
//!
//! The depth-first search keeps its path on an explicit stack, so a history of any length
//! needs no deeper native stack than a short one.

use std::collections::{HashMap, HashSet};

use super::{
    bitset::Bitset,
    budget::Meter,
    fxhash::FxBuild,
    links::Links,
    model::{Model, OpOf},
};

/// A model state, by its index in [`Search::states`].
pub(super) type StateId = u32;

/// An operation placed in the linearization, and the state it was applied to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placed {
    pub(super) op: usize,
    pub(super) before: StateId,
}

/// The deepest point the search reached without being able to go on.
#[derive(Debug)]
pub(super) struct DeadEnd {
    pub(super) prefix: Vec<Placed>,
    pub(super) state: StateId,
    /// The unplaced completed operation that returned first: it must come next or soon.
    pub(super) blocker: Option<usize>,
    /// Candidates whose model answer contradicted the recorded one.
    pub(super) misfits: Vec<usize>,
}

/// Where a search stands after a slice of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// A linearization exists.
    Linearizable,
    /// None does.
    NotLinearizable,
    /// The slice ran out first; resume to go on.
    Paused,
}

/// One level of the depth-first search: a configuration and the moves left to try from it.
#[derive(Debug)]
struct Frame {
    state: StateId,
    /// The operation whose placement led here (`None` at the root).
    via: Option<usize>,
    /// Operations that fit here, with the state after each.
    fits: Vec<(usize, StateId)>,
    tried: usize,
}

/// One search over the operations of one partition.
///
/// States are interned and transitions cached: the model is deterministic, so placing
/// operation `i` on state `s` always leads to the same state, and a state reached along
/// many paths is stepped, copied and hashed only once.
pub(super) struct Search<'a, M: Model> {
    pub(super) model: &'a M,
    /// The operations to place, sorted by call time.
    pub(super) ops: Vec<&'a OpOf<M>>,
    /// Unplaced operations by call time.
    calls: Links,
    /// Unplaced completed operations by return time.
    returns: Links,
    placed: Bitset,
    /// Completed operations not placed yet; the search succeeds when none are left.
    open: usize,
    pub(super) states: Vec<M::State>,
    ids: HashMap<M::State, StateId, FxBuild>,
    /// `(state, op)` to the state after it, `None` when the model contradicts the record.
    transitions: HashMap<(StateId, usize), Option<StateId>, FxBuild>,
    /// Configurations already explored: placed set and state.
    seen: HashSet<(Bitset, StateId), FxBuild>,
    stack: Vec<Frame>,
    pub(super) deepest: Option<DeadEnd>,
}

impl<'a, M: Model> Search<'a, M> {
    /// A search over `ops`, which must be sorted by call time.
    pub(super) fn new(model: &'a M, ops: Vec<&'a OpOf<M>>) -> Self {
        let n = ops.len();
        let mut by_return: Vec<(u64, usize)> = ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| op.ret().map(|ret| (ret, i)))
            .collect();
        by_return.sort_unstable();
        Self {
            model,
            calls: Links::new(n, 0..n),
            open: by_return.len(),
            returns: Links::new(n, by_return.into_iter().map(|(_, i)| i)),
            placed: Bitset::new(n),
            ops,
            states: Vec::new(),
            ids: HashMap::default(),
            transitions: HashMap::default(),
            seen: HashSet::default(),
            stack: Vec::new(),
            deepest: None,
        }
    }

    /// Starts the search from `init`.
    pub(super) fn start(&mut self, init: M::State, meter: &mut Meter) -> Result<Progress, String> {
        let start = self.intern(init)?;
        if self.open == 0 {
            return Ok(Progress::Linearizable);
        }
        self.enter(start, None, meter)?;
        Ok(Progress::Paused)
    }

    /// Goes on for at most `moves` placements tried; `Err` when the budget ran out first.
    pub(super) fn resume(&mut self, meter: &mut Meter, moves: u64) -> Result<Progress, String> {
        for _ in 0..moves {
            let Some(top) = self.stack.last_mut() else {
                return Ok(Progress::NotLinearizable);
            };
            let Some(&(i, next)) = top.fits.get(top.tried) else {
                self.leave();
                continue;
            };
            top.tried += 1;
            self.placed.insert(i);
            if !self.seen.insert((self.placed.clone(), next)) {
                self.placed.remove(i);
                continue;
            }
            self.lift(i);
            if self.open == 0 {
                return Ok(Progress::Linearizable);
            }
            self.enter(next, Some(i), meter)?;
        }
        Ok(if self.stack.is_empty() {
            Progress::NotLinearizable
        } else {
            Progress::Paused
        })
    }

    /// Pushes the configuration reached (operation `via` placed, model in `state`) with the
    /// operations that may follow.
    fn enter(
        &mut self,
        state: StateId,
        via: Option<usize>,
        meter: &mut Meter,
    ) -> Result<(), String> {
        let mut misfits = Vec::new();
        let mut fits = Vec::new();
        for i in self.candidates() {
            meter.tick()?;
            match self.transition(state, i)? {
                None => misfits.push(i),
                Some(next) if next != state => fits.push((i, next)),
                // It fits now, changes nothing, and cannot change anything wherever else it
                // fits: placing it first loses no linearization (anything placed before it
                // could as well come after), so do not branch.
                Some(_) if self.settled(i) => {
                    fits = vec![(i, state)];
                    misfits.clear();
                    break;
                }
                // An unknown op that would change nothing need not be placed now.
                Some(_) if self.ops[i].completion.is_none() => {}
                Some(_) => fits.push((i, state)),
            }
        }
        let dead = fits.is_empty();
        self.stack.push(Frame {
            state,
            via,
            fits,
            tried: 0,
        });
        if dead {
            self.note_dead_end(state, misfits);
        }
        Ok(())
    }

    /// Is completed operation `i` one the model says is settled once it changes nothing?
    fn settled(&self, i: usize) -> bool {
        let op = self.ops[i];
        op.completion
            .as_ref()
            .is_some_and(|c| self.model.settled_when_idle(&op.input, &c.output))
    }

    /// Pops the top frame, taking back the placement that led to it.
    fn leave(&mut self) {
        if let Some(Frame { via: Some(i), .. }) = self.stack.pop() {
            self.unlift(i);
            self.placed.remove(i);
        }
    }

    /// Takes placed operation `i` out of the unplaced lists.
    fn lift(&mut self, i: usize) {
        self.calls.remove(i);
        if self.ops[i].completion.is_some() {
            self.returns.remove(i);
            self.open -= 1;
        }
    }

    fn unlift(&mut self, i: usize) {
        if self.ops[i].completion.is_some() {
            self.returns.restore(i);
            self.open += 1;
        }
        self.calls.restore(i);
    }

    /// Unplaced operations that may come next: invoked no later than the earliest return of
    /// an unplaced completed operation.
    fn candidates(&self) -> Vec<usize> {
        let horizon = self.blocker().and_then(|i| self.ops[i].ret());
        self.calls
            .iter()
            .take_while(|&i| horizon.is_none_or(|h| self.ops[i].call <= h))
            .collect()
    }

    /// The unplaced completed operation that returned first: nothing invoked after its
    /// return can be placed before it is.
    pub(super) fn blocker(&self) -> Option<usize> {
        self.returns.first()
    }

    /// The state after operation `i` on `state`, or `None` if the model's answer there
    /// contradicts the recorded outcome.
    fn transition(&mut self, state: StateId, i: usize) -> Result<Option<StateId>, String> {
        if let Some(&known) = self.transitions.get(&(state, i)) {
            return Ok(known);
        }
        let op = self.ops[i];
        let (answer, after) = self.model.step(&self.states[state as usize], &op.input);
        let fits = op
            .completion
            .as_ref()
            .is_none_or(|c| self.model.matches(&c.output, &answer));
        let next = match after {
            _ if !fits => None,
            None => Some(state),
            Some(after) => Some(self.intern(after)?),
        };
        self.transitions.insert((state, i), next);
        Ok(next)
    }

    fn intern(&mut self, state: M::State) -> Result<StateId, String> {
        if let Some(&id) = self.ids.get(&state) {
            return Ok(id);
        }
        let id = StateId::try_from(self.states.len())
            .map_err(|_| format!("more than {} distinct model states", StateId::MAX))?;
        self.states.push(state.clone());
        self.ids.insert(state, id);
        Ok(id)
    }

    /// The operations placed on the current path, each with the state it was applied to.
    fn prefix(&self) -> Vec<Placed> {
        self.stack
            .windows(2)
            .filter_map(|w| {
                w[1].via.map(|op| Placed {
                    op,
                    before: w[0].state,
                })
            })
            .collect()
    }

    fn note_dead_end(&mut self, state: StateId, misfits: Vec<usize>) {
        let depth = self.stack.len() - 1;
        if self
            .deepest
            .as_ref()
            .is_some_and(|d| d.prefix.len() >= depth)
        {
            return;
        }
        self.deepest = Some(DeadEnd {
            prefix: self.prefix(),
            state,
            blocker: self.blocker(),
            misfits,
        });
    }
}
