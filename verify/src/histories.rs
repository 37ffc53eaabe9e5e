//! Published histories with known verdicts — Jepsen's etcd logs as Porcupine keeps them,
//! Porcupine's key-value logs, Knossos's test histories — read into the linearizability
//! checker's terms, with the models they are checked against.
//!
//! Each format is read as its authors mean it: the position of an event in the file is its
//! time, each process runs one operation at a time, and `:info` or never-completed
//! operations are unknown outcomes (see the data set's own README).

pub mod edn;
pub mod etcd_log;
pub mod generate;
pub mod knossos;
pub mod kv;
pub mod kv_log;
pub mod multi_register;
pub mod mutex;
mod pairing;
pub mod register;

use std::{fmt, str::FromStr};

use crate::linearizability::{Budget, Model, OpOf, Verdict, check_history};

/// A history that cannot be read, and the line (1-based) where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// The line of the event (or token) that could not be read.
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

/// The models histories can be checked against, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelName {
    /// Jepsen etcd log (format A): one register, initially unset, read/write/cas.
    Etcd,
    /// Porcupine key-value log (format B): get/put/append on string keys.
    Kv,
    /// Knossos history (format C): one register, initially 0, read/write/cas.
    CasRegister,
    /// Knossos history (format C): registers `x`, `y` (initially 0) under transactions.
    MultiRegister,
    /// Knossos history (format C): acquire/release.
    Mutex,
}

impl ModelName {
    /// Every model, in command-line order.
    pub const ALL: [ModelName; 5] = [
        ModelName::Etcd,
        ModelName::Kv,
        ModelName::CasRegister,
        ModelName::MultiRegister,
        ModelName::Mutex,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            ModelName::Etcd => "etcd",
            ModelName::Kv => "kv",
            ModelName::CasRegister => "cas-register",
            ModelName::MultiRegister => "multi-register",
            ModelName::Mutex => "mutex",
        }
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A model name that is not one of [`ModelName::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model {0:?} (expected etcd, kv, cas-register, multi-register or mutex)")]
pub struct UnknownModel(pub String);

impl FromStr for ModelName {
    type Err = UnknownModel;

    fn from_str(s: &str) -> Result<Self, UnknownModel> {
        ModelName::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownModel(s.to_owned()))
    }
}

/// How to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The search budget for the whole file.
    pub budget: Budget,
    /// Check a key-value history per key (`false`: as one store, as Porcupine's slow tests
    /// do). Other models have a single partition.
    pub partitioned: bool,
}

/// The result of checking one history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The verdict.
    pub verdict: Verdict,
    /// Client operations invoked (whatever their outcome).
    pub ops: usize,
}

/// Reads `text` as a history of `model`'s format and checks it.
pub fn check_text(model: ModelName, text: &str, options: Options) -> Result<Checked, ParseError> {
    let budget = options.budget;
    Ok(match model {
        ModelName::Etcd => {
            let register = register::Register { initial: None };
            checked(&register, &etcd_log::parse(text)?, budget)
        }
        ModelName::Kv => {
            let store = kv::Kv {
                partitioned: options.partitioned,
            };
            checked(&store, &kv_log::parse(text)?, budget)
        }
        ModelName::CasRegister => {
            let register = register::Register { initial: Some(0) };
            checked(&register, &knossos::parse(&register, text)?, budget)
        }
        ModelName::MultiRegister => {
            let registers = multi_register::MultiRegister::knossos();
            checked(&registers, &knossos::parse(&registers, text)?, budget)
        }
        ModelName::Mutex => checked(&mutex::Mutex, &knossos::parse(&mutex::Mutex, text)?, budget),
    })
}

fn checked<M: Model>(model: &M, ops: &[OpOf<M>], budget: Budget) -> Checked {
    Checked {
        verdict: check_history(model, ops, budget),
        ops: ops.len(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
