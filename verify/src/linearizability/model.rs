//! What the checker needs to know about a sequential specification, and the shape of the
//! operations it checks.

use std::{fmt, hash::Hash};

/// A deterministic sequential specification the search can step through.
///
/// The checker never looks inside inputs, answers or states: it only steps the model,
/// asks whether an answer explains what was recorded, and interns states by equality.
pub trait Model {
    /// What splits a history into independent parts (an operation only touches the state of
    /// its own part). A `Display` that prints nothing marks a history checked as one part.
    type Key: Ord + Clone + fmt::Display;
    /// What a client asked for.
    type Input: fmt::Display;
    /// What a client saw when the operation completed.
    type Output: fmt::Display;
    /// What the model answers to an input in some state.
    type Answer: fmt::Display;
    /// The model state; equal states must behave identically from then on.
    type State: Clone + Eq + Hash;

    /// The part an input belongs to.
    fn partition(&self, input: &Self::Input) -> Self::Key;

    /// The state a part starts in.
    fn init(&self, key: &Self::Key) -> Self::State;

    /// The answer to `input` in `state`, and the state after it (`None`: unchanged, which
    /// spares a copy for the many operations that change nothing).
    fn step(&self, state: &Self::State, input: &Self::Input)
    -> (Self::Answer, Option<Self::State>);

    /// Does the model's answer explain what was recorded?
    fn matches(&self, recorded: &Self::Output, answer: &Self::Answer) -> bool;

    /// Outcomes that certainly changed nothing but that the model need not predict (a
    /// refused lock, a timed-out read): they fit anywhere in their interval, so the search
    /// leaves them out.
    fn no_effect(&self, _input: &Self::Input, _recorded: &Self::Output) -> bool {
        false
    }

    /// True when `input`, having matched `recorded` in some state without changing it, can
    /// change no state reachable from there in which it matches again: a read, a refusal, an
    /// idempotent repeat that can never become a first time. The search places such an
    /// operation as soon as it fits unchanged, without trying alternatives, which is only
    /// sound if this holds; `false` (the default) is always safe. (A register write of the
    /// value already there is not settled: later, after another write, it would change the
    /// state.)
    fn settled_when_idle(&self, _input: &Self::Input, _recorded: &Self::Output) -> bool {
        false
    }

    /// A state as a person reads it, for explanations.
    fn describe(&self, state: &Self::State) -> String;

    /// A reason, found without a search, that no order of `ops` (one partition's, sorted by
    /// call, those of [`Model::no_effect`] left out) can explain them; `None` decides
    /// nothing. It must be sound: a model that cannot prove a violation cheaply keeps the
    /// default. (A search must exhaust every order before a violation deep in a long,
    /// highly concurrent history; a cheap proof spares it.)
    fn refute(&self, _ops: &[&OpOf<Self>]) -> Option<String>
    where
        Self: Sized,
    {
        None
    }
}

/// The key of a model checked as a whole: it displays as nothing, so explanations carry no
/// partition name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Whole;

impl fmt::Display for Whole {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

/// When an operation completed and what its client saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion<O> {
    /// Completion time; any unit, only the order of times matters.
    pub at: u64,
    /// What the client saw.
    pub output: O,
}

/// An operation of a history: who ran it, what it asked, when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOp<I, O> {
    /// The (sequential) client that ran it.
    pub process: u64,
    /// What it asked for.
    pub input: I,
    /// Invocation time, in the unit of [`Completion::at`]; times must be distinct.
    pub call: u64,
    /// `None` when the outcome is unknown (a timeout, or no completion at all): it may take
    /// effect at any point after its call, or never.
    pub completion: Option<Completion<O>>,
}

impl<I, O> TimedOp<I, O> {
    /// Completion time, if it completed.
    pub fn ret(&self) -> Option<u64> {
        self.completion.as_ref().map(|c| c.at)
    }
}

impl<I: fmt::Display, O> fmt::Display for TimedOp<I, O> {
    /// `p3 write 4 [120..450]`; an open-ended interval for unknown outcomes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{} {} [{}..", self.process, self.input, self.call)?;
        match self.ret() {
            Some(ret) => write!(f, "{ret}]"),
            None => f.write_str("]"),
        }
    }
}

/// The operation type of a model's histories.
pub type OpOf<M> = TimedOp<<M as Model>::Input, <M as Model>::Output>;
