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
//!
//! The configurations seen are kept as fingerprints, not as sets: a 128-bit Zobrist hash of
//! the placed set (one random key per operation, XORed in and out as operations are placed
//! and taken back, so a step costs O(1) whatever the history's length) with the state's id.
//! A set of a 20,000-operation history is 2.5 KB; its fingerprint is 16 bytes. Two distinct
//! placed sets share a fingerprint with probability 2^-128 per pair: over the ~10^8
//! configurations a memory budget of a few GB allows, a chance below 10^-22 that one
//! configuration is wrongly taken as seen (which could only turn a linearizable verdict
//! into a violation, never the reverse) — far below the chance of a memory fault.

use std::collections::{HashMap, HashSet};

use super::{
    budget::{Exhausted, Limit, Meter},
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
    /// Zobrist keys, one per operation.
    keys: Vec<u128>,
    /// Fingerprint of the placed set: the XOR of its operations' keys.
    print: u128,
    /// Completed operations not placed yet; the search succeeds when none are left.
    open: usize,
    pub(super) states: Vec<M::State>,
    ids: HashMap<M::State, StateId, FxBuild>,
    /// `(state, op)` to the state after it, `None` when the model contradicts the record.
    transitions: HashMap<(StateId, usize), Option<StateId>, FxBuild>,
    /// Configurations already explored: placed set's fingerprint and state.
    seen: HashSet<(u128, StateId), FxBuild>,
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
            keys: zobrist_keys(n),
            print: 0,
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
    pub(super) fn start(
        &mut self,
        init: M::State,
        meter: &mut Meter,
    ) -> Result<Progress, Exhausted> {
        let start = self.intern(init)?;
        if self.open == 0 {
            return Ok(Progress::Linearizable);
        }
        self.enter(start, None, meter)?;
        Ok(Progress::Paused)
    }

    /// Goes on for at most `moves` placements tried; `Err` when the budget ran out first.
    pub(super) fn resume(&mut self, meter: &mut Meter, moves: u64) -> Result<Progress, Exhausted> {
        for _ in 0..moves {
            // Every turn counts, a configuration found seen as much as one entered: a search
            // that mostly meets seen configurations must still see its deadline.
            meter.tick(|| self.bytes_held())?;
            let Some(top) = self.stack.last_mut() else {
                return Ok(Progress::NotLinearizable);
            };
            let Some(&(i, next)) = top.fits.get(top.tried) else {
                self.leave();
                continue;
            };
            top.tried += 1;
            let print = self.print ^ self.keys[i];
            if !self.seen.insert((print, next)) {
                continue;
            }
            self.print = print;
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
    ) -> Result<(), Exhausted> {
        let mut misfits = Vec::new();
        let mut fits = Vec::new();
        for i in self.candidates() {
            meter.tick(|| self.bytes_held())?;
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
            self.print ^= self.keys[i];
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
    fn transition(&mut self, state: StateId, i: usize) -> Result<Option<StateId>, Exhausted> {
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

    fn intern(&mut self, state: M::State) -> Result<StateId, Exhausted> {
        if let Some(&id) = self.ids.get(&state) {
            return Ok(id);
        }
        let id = StateId::try_from(self.states.len()).map_err(|_| Exhausted {
            limit: Limit::Size,
            reason: format!("more than {} distinct model states", StateId::MAX),
        })?;
        self.states.push(state.clone());
        self.ids.insert(state, id);
        Ok(id)
    }

    /// A close estimate of the bytes the search's tables hold: each entry with the hash
    /// table's control byte and its spare capacity, the states by their inline size (a
    /// state's heap parts, small for every model here, are not counted), and the path.
    pub(super) fn bytes_held(&self) -> u64 {
        fn table<T>(capacity: usize) -> u64 {
            (capacity * (size_of::<T>() + 1)) as u64
        }
        // A table about to grow holds its old and its new array at once.
        let growing = self.seen.len() + 2 * 1024 >= self.seen.capacity();
        let seen_capacity = self.seen.capacity() * if growing { 3 } else { 1 };
        table::<(u128, StateId)>(seen_capacity)
            + table::<((StateId, usize), Option<StateId>)>(self.transitions.capacity())
            + table::<(M::State, StateId)>(self.ids.capacity())
            + (self.states.capacity() * size_of::<M::State>()) as u64
            + self
                .stack
                .iter()
                .map(|f| (size_of::<Frame>() + f.fits.capacity() * 16) as u64)
                .sum::<u64>()
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

/// One random 128-bit key per operation, the same on every run (a fixed seed: a check is
/// reproducible), from SplitMix64.
fn zobrist_keys(n: usize) -> Vec<u128> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| (u128::from(next()) << 64) | u128::from(next()))
        .collect()
}
