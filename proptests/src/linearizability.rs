//! Linearizability checker for I8 (DESIGN §6, §7): a Wing–Gong search with Lowe's
//! memoisation, as in Porcupine, run per template.
//!
//! The search places operations one at a time in an order that respects real time (an
//! operation may go next only if no unplaced operation returned before it was invoked), steps
//! the model, and keeps going while the model's answers match the recorded ones. A
//! configuration — the set of placed operations and the model state — is never explored
//! twice. Operations with an unknown outcome may take effect at any point after their call,
//! or never: they never block the search and need not be placed.
//!
//! Three rules keep the search small without losing linearizations: an operation that fits
//! and changes nothing (a refusal, an idempotent repeat) is placed at once without trying
//! alternatives, since anything placed before it could as well come after; refusals that
//! certainly had no effect but that the model cannot predict (`busy`) are left out; and
//! model states are interned with their transitions cached, so each distinct state is
//! stepped and copied once however many paths reach it.

use std::{
    collections::{HashMap, HashSet},
    fmt::Write as _,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};

use crate::{
    history::{History, Operation, Outcome},
    model::{Effect, State},
    op::{Op, OpResult, Refusal, TemplateSpec},
};

/// How much work a check may do before it answers [`Verdict::Undecided`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Placements the search may try (over all partitions of one check).
    pub max_steps: u64,
    /// Wall-clock limit for the whole check.
    pub deadline: Option<Duration>,
}

impl Default for Budget {
    /// Far more than a well-sized history (a few processes × ten ops) needs.
    fn default() -> Self {
        Self {
            max_steps: 2_000_000,
            deadline: Some(Duration::from_secs(10)),
        }
    }
}

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
    },
    /// The budget ran out (or the history was malformed): nothing is proven either way.
    Undecided {
        /// Why no verdict was reached.
        reason: String,
    },
}

impl Verdict {
    /// True only for [`Verdict::Linearizable`].
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable)
    }
}

/// Checks the operations of one partition against the model, starting from `init`.
pub fn check(ops: &[Operation], init: &State, budget: Budget) -> Verdict {
    check_metered(ops, init, &mut Meter::new(budget))
}

/// Checks a whole history, each template on its own (an operation only touches its
/// template's state), under one shared budget. Any violation wins, naming its template;
/// otherwise any undecided partition makes the whole check undecided.
pub fn check_partitioned(history: &History, specs: &[TemplateSpec], budget: Budget) -> Verdict {
    let parts = match history.partition_by_template() {
        Ok(parts) => parts,
        Err(e) => {
            return Verdict::Undecided {
                reason: format!("malformed history: {e}"),
            };
        }
    };
    let mut meter = Meter::new(budget);
    let mut violations = Vec::new();
    let mut undecided = Vec::new();
    for (template, ops) in &parts {
        let own: Vec<TemplateSpec> = specs
            .iter()
            .filter(|s| s.id == *template)
            .cloned()
            .collect();
        match check_metered(ops, &State::new(&own), &mut meter) {
            Verdict::Linearizable => {}
            Verdict::NotLinearizable { explanation } => {
                violations.push(format!("template {template}: {explanation}"));
            }
            Verdict::Undecided { reason } => {
                undecided.push(format!("template {template}: {reason}"))
            }
        }
    }
    if !violations.is_empty() {
        Verdict::NotLinearizable {
            explanation: violations.join("\n"),
        }
    } else if !undecided.is_empty() {
        Verdict::Undecided {
            reason: undecided.join("\n"),
        }
    } else {
        Verdict::Linearizable
    }
}

fn check_metered(ops: &[Operation], init: &State, meter: &mut Meter) -> Verdict {
    let mut ops: Vec<&Operation> = ops.iter().filter(|op| !is_no_effect(op)).collect();
    ops.sort_by_key(|op| op.call);
    let mut search = Search::new(ops, meter);
    match search.run(init) {
        Ok(true) => Verdict::Linearizable,
        Ok(false) => Verdict::NotLinearizable {
            explanation: search.explain(),
        },
        Err(reason) => Verdict::Undecided { reason },
    }
}

/// Refusals the model cannot predict but that certainly changed nothing, so they fit
/// anywhere in their interval and need no placing: `busy` (the redeem lock was held), and
/// `invalid_request` on a redeem or refund (input validation, e.g. a negative order amount
/// the model does not see). A claim's `invalid_request` is checked: the model answers it
/// for malformed ids and for a request id owned by another user.
fn is_no_effect(op: &Operation) -> bool {
    match op.outcome {
        Outcome::Fail(Refusal::Busy) => true,
        Outcome::Fail(Refusal::InvalidRequest) => !matches!(op.op, Op::Claim { .. }),
        _ => false,
    }
}

/// Does the model's answer explain the recorded outcome?
fn explains(outcome: &Outcome, answer: &OpResult) -> bool {
    match outcome {
        Outcome::Ok(recorded) => recorded == answer,
        Outcome::Fail(refusal) => answer.refusal() == Some(*refusal),
        Outcome::Unknown => true,
    }
}

/// Counts placements tried and watches the clock.
struct Meter {
    steps: u64,
    budget: Budget,
    deadline: Option<Instant>,
}

impl Meter {
    fn new(budget: Budget) -> Self {
        Self {
            steps: 0,
            budget,
            // A deadline too far away to represent is no deadline.
            deadline: budget.deadline.and_then(|d| Instant::now().checked_add(d)),
        }
    }

    /// Accounts for one placement tried, or says why no more are allowed.
    fn tick(&mut self) -> Result<(), String> {
        if self.steps >= self.budget.max_steps {
            return Err(format!(
                "step budget of {} exhausted",
                self.budget.max_steps
            ));
        }
        self.steps += 1;
        match (self.deadline, self.budget.deadline) {
            (Some(at), Some(limit)) if Instant::now() > at => Err(format!(
                "deadline of {limit:?} passed after {} steps",
                self.steps
            )),
            _ => Ok(()),
        }
    }
}

/// A fixed-size set of operation indices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Bitset(Vec<u64>);

impl Bitset {
    fn new(len: usize) -> Self {
        Self(vec![0; len.div_ceil(64)])
    }

    fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn insert(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    fn remove(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }
}

/// A model state, by its index in [`Search::states`].
type StateId = u32;

/// An operation placed in the linearization, and the state it was applied to.
#[derive(Debug, Clone, Copy)]
struct Placed {
    op: usize,
    before: StateId,
}

/// The deepest point the search reached without being able to go on.
#[derive(Debug)]
struct DeadEnd {
    prefix: Vec<Placed>,
    state: StateId,
    /// The unplaced completed operation that returned first: it must come next or soon.
    blocker: Option<usize>,
    /// Candidates whose model answer contradicted the recorded one.
    misfits: Vec<usize>,
}

/// One depth-first search over orders of `ops` (sorted by call time).
///
/// States are interned and transitions cached: the model is deterministic, so placing
/// operation `i` on state `s` always leads to the same state, and a state reached along
/// many paths is stepped, copied and hashed only once.
struct Search<'a, 'm> {
    ops: Vec<&'a Operation>,
    placed: Bitset,
    /// Completed operations not placed yet; the search succeeds when none are left.
    open: usize,
    states: Vec<State>,
    ids: HashMap<State, StateId>,
    /// `(state, op)` to the state after it, `None` when the model contradicts the record.
    transitions: HashMap<(StateId, usize), Option<StateId>>,
    /// Configurations already explored: placed set and state.
    seen: HashSet<(Bitset, StateId)>,
    prefix: Vec<Placed>,
    deepest: Option<DeadEnd>,
    meter: &'m mut Meter,
}

impl<'a, 'm> Search<'a, 'm> {
    fn new(ops: Vec<&'a Operation>, meter: &'m mut Meter) -> Self {
        Self {
            placed: Bitset::new(ops.len()),
            open: ops.iter().filter(|op| op.ret.is_some()).count(),
            ops,
            states: Vec::new(),
            ids: HashMap::new(),
            transitions: HashMap::new(),
            seen: HashSet::new(),
            prefix: Vec::new(),
            deepest: None,
            meter,
        }
    }

    /// True if a linearization exists; `Err` when the budget ran out first.
    fn run(&mut self, init: &State) -> Result<bool, String> {
        let start = self.intern(init.clone())?;
        self.extend(start)
    }

    /// Tries every operation that may come next after the current prefix.
    fn extend(&mut self, state: StateId) -> Result<bool, String> {
        if self.open == 0 {
            return Ok(true);
        }
        let mut misfits = Vec::new();
        let mut fits = Vec::new();
        for i in self.candidates() {
            self.meter.tick()?;
            match self.transition(state, i)? {
                None => misfits.push(i),
                Some(next) if next != state => fits.push((i, next)),
                // It fits now and changes nothing: placing it first loses no linearization
                // (anything placed before it could as well come after), so do not branch.
                Some(_) if self.ops[i].ret.is_some() => return self.place(i, state, state),
                // An unknown op that would change nothing need not be placed now.
                Some(_) => {}
            }
        }
        for (i, next) in fits {
            if self.place(i, state, next)? {
                return Ok(true);
            }
        }
        self.note_dead_end(state, misfits);
        Ok(false)
    }

    /// Places operation `i` and searches on, unless this configuration was seen before.
    fn place(&mut self, i: usize, before: StateId, next: StateId) -> Result<bool, String> {
        self.placed.insert(i);
        let mut found = false;
        if self.seen.insert((self.placed.clone(), next)) {
            let completed = self.ops[i].ret.is_some();
            self.open -= usize::from(completed);
            self.prefix.push(Placed { op: i, before });
            found = self.extend(next)?;
            self.prefix.pop();
            self.open += usize::from(completed);
        }
        self.placed.remove(i);
        Ok(found)
    }

    /// Unplaced operations that may come next: invoked no later than the earliest return of
    /// an unplaced completed operation.
    fn candidates(&self) -> Vec<usize> {
        let horizon = self
            .blocker()
            .and_then(|i| self.ops[i].ret)
            .unwrap_or(u64::MAX);
        (0..self.ops.len())
            .take_while(|&i| self.ops[i].call <= horizon)
            .filter(|&i| !self.placed.contains(i))
            .collect()
    }

    /// The unplaced completed operation that returned first: nothing invoked after its
    /// return can be placed before it is.
    fn blocker(&self) -> Option<usize> {
        (0..self.ops.len())
            .filter(|&i| !self.placed.contains(i))
            .filter_map(|i| self.ops[i].ret.map(|ret| (ret, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// The state after operation `i` on `state`, or `None` if the model's answer there
    /// contradicts the recorded outcome.
    fn transition(&mut self, state: StateId, i: usize) -> Result<Option<StateId>, String> {
        if let Some(&known) = self.transitions.get(&(state, i)) {
            return Ok(known);
        }
        let (op, outcome) = (&self.ops[i].op, &self.ops[i].outcome);
        let current = &self.states[state as usize];
        let (answer, effect) = current.answer(op);
        let next = if !explains(outcome, &answer) {
            None
        } else if effect == Effect::None {
            Some(state)
        } else {
            let mut next = current.clone();
            next.commit(op, effect);
            Some(self.intern(next)?)
        };
        self.transitions.insert((state, i), next);
        Ok(next)
    }

    fn intern(&mut self, state: State) -> Result<StateId, String> {
        if let Some(&id) = self.ids.get(&state) {
            return Ok(id);
        }
        let id = StateId::try_from(self.states.len())
            .map_err(|_| format!("more than {} distinct model states", StateId::MAX))?;
        self.states.push(state.clone());
        self.ids.insert(state, id);
        Ok(id)
    }

    fn note_dead_end(&mut self, state: StateId, misfits: Vec<usize>) {
        if self
            .deepest
            .as_ref()
            .is_some_and(|d| d.prefix.len() >= self.prefix.len())
        {
            return;
        }
        self.deepest = Some(DeadEnd {
            prefix: self.prefix.clone(),
            state,
            blocker: self.blocker(),
            misfits,
        });
    }

    /// The model's answer to operation `i` in state `state` (for explanations).
    fn answer(&self, state: StateId, i: usize) -> String {
        self.states
            .get(state as usize)
            .map_or_else(String::new, |s| s.answer(&self.ops[i].op).0.to_string())
    }

    /// Human-readable account of the deepest dead end.
    fn explain(&self) -> String {
        let Some(end) = &self.deepest else {
            return "no linearization exists".into();
        };
        let completed = |i: usize| self.ops[i].ret.is_some();
        let total = (0..self.ops.len()).filter(|&i| completed(i)).count();
        let placed = end.prefix.iter().filter(|p| completed(p.op)).count();
        let mut out = format!(
            "{placed} of {total} completed operations linearized; longest linearizable prefix:\n"
        );
        for (n, p) in end.prefix.iter().enumerate() {
            let (op, answer) = (self.ops[p.op], self.answer(p.before, p.op));
            let _ = writeln!(out, "  {}. {op} -> {answer}", n + 1);
        }
        if let Some(state) = self.states.get(end.state as usize) {
            let _ = write!(out, "model state after it:\n  {state}");
        }
        if let Some(b) = end.blocker {
            let op = self.ops[b];
            let _ = writeln!(
                out,
                "stuck before {op}, recorded {}: it or an operation concurrent with it must \
                 come next, and none fits",
                op.outcome
            );
        }
        for &i in &end.misfits {
            let (op, answer) = (self.ops[i], self.answer(end.state, i));
            let _ = writeln!(
                out,
                "  tried {op}: recorded {}, model answers {answer}",
                op.outcome
            );
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
