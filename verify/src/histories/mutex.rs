//! Knossos's mutex: acquire needs it free and takes it, release needs it held and frees it.

use std::fmt;

use crate::linearizability::{Model, Whole};

/// What a client asks of the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexOp {
    /// Take the lock.
    Acquire,
    /// Give it back.
    Release,
}

/// What a client saw, and what the model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexAnswer {
    /// Granted.
    Ok,
    /// Refused: already held (acquire) or not held (release). Knossos drops refused
    /// operations from its histories, so recorded refusals have no effect.
    Refused,
}

/// The mutex model; one lock, so one partition. The state is "held".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutex;

impl Model for Mutex {
    type Key = Whole;
    type Input = MutexOp;
    type Output = MutexAnswer;
    type Answer = MutexAnswer;
    type State = bool;

    fn partition(&self, _: &MutexOp) -> Whole {
        Whole
    }

    fn init(&self, _: &Whole) -> bool {
        false
    }

    fn step(&self, held: &bool, op: &MutexOp) -> (MutexAnswer, Option<bool>) {
        match (op, held) {
            (MutexOp::Acquire, false) => (MutexAnswer::Ok, Some(true)),
            (MutexOp::Release, true) => (MutexAnswer::Ok, Some(false)),
            _ => (MutexAnswer::Refused, None),
        }
    }

    fn matches(&self, recorded: &MutexAnswer, answer: &MutexAnswer) -> bool {
        recorded == answer
    }

    fn no_effect(&self, _: &MutexOp, recorded: &MutexAnswer) -> bool {
        *recorded == MutexAnswer::Refused
    }

    fn describe(&self, held: &bool) -> String {
        if *held { "held" } else { "free" }.into()
    }
}

impl fmt::Display for MutexOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MutexOp::Acquire => "acquire",
            MutexOp::Release => "release",
        })
    }
}

impl fmt::Display for MutexAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MutexAnswer::Ok => "ok",
            MutexAnswer::Refused => "refused",
        })
    }
}
