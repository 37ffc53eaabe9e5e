//! A single register with read, write and compare-and-set: Jepsen's etcd test (register
//! initially unset) and Knossos's `cas-register` (initially 0).

mod sources;

use std::fmt;

use super::edn::Edn;
use crate::linearizability::{Model, OpOf, Whole};

/// What a client asks of the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterOp {
    /// Read the value.
    Read,
    /// Set the value.
    Write(i64),
    /// Set `to` if the value is `from`.
    Cas {
        /// The value expected.
        from: i64,
        /// The value set.
        to: i64,
    },
}

impl RegisterOp {
    /// The operation Jepsen and Knossos write as `:f` with `:value` (a read's is ignored).
    pub fn from_edn(f: &str, value: &Edn) -> Result<Self, String> {
        match (f, value) {
            ("read", _) => Ok(RegisterOp::Read),
            ("write", Edn::Int(v)) => Ok(RegisterOp::Write(*v)),
            ("cas", Edn::Seq(pair)) => match pair.as_slice() {
                [Edn::Int(from), Edn::Int(to)] => Ok(RegisterOp::Cas {
                    from: *from,
                    to: *to,
                }),
                _ => Err(format!("a cas needs [from to], not {value:?}")),
            },
            _ => Err(format!("cannot invoke :{f} with {value:?}")),
        }
    }

    /// Its `:f`.
    pub fn name(&self) -> &'static str {
        match self {
            RegisterOp::Read => "read",
            RegisterOp::Write(_) => "write",
            RegisterOp::Cas { .. } => "cas",
        }
    }
}

/// What a client saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterSeen {
    /// A read returned this (`None`: the register was unset).
    Read(Option<i64>),
    /// A read returned, but the history does not say what (Knossos's `nil` read).
    ReadAny,
    /// A write was acknowledged.
    Written,
    /// A compare-and-set was applied (`true`) or found another value (`false`).
    Cas(bool),
    /// The operation failed and certainly had no effect (Knossos drops these).
    Failed,
}

/// What the model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterAnswer {
    /// A read's value.
    Value(Option<i64>),
    /// A write is always acknowledged.
    Written,
    /// Whether a compare-and-set applies.
    Cas(bool),
}

/// The register model; one register, so one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    /// The value before any write (`None`: unset).
    pub initial: Option<i64>,
}

impl Model for Register {
    type Key = Whole;
    type Input = RegisterOp;
    type Output = RegisterSeen;
    type Answer = RegisterAnswer;
    type State = Option<i64>;

    fn partition(&self, _: &RegisterOp) -> Whole {
        Whole
    }

    fn init(&self, _: &Whole) -> Option<i64> {
        self.initial
    }

    fn step(&self, state: &Option<i64>, op: &RegisterOp) -> (RegisterAnswer, Option<Option<i64>>) {
        match *op {
            RegisterOp::Read => (RegisterAnswer::Value(*state), None),
            RegisterOp::Write(v) => (RegisterAnswer::Written, Some(Some(v))),
            RegisterOp::Cas { from, to } if *state == Some(from) => {
                (RegisterAnswer::Cas(true), Some(Some(to)))
            }
            RegisterOp::Cas { .. } => (RegisterAnswer::Cas(false), None),
        }
    }

    fn matches(&self, recorded: &RegisterSeen, answer: &RegisterAnswer) -> bool {
        match (recorded, answer) {
            (RegisterSeen::Read(seen), RegisterAnswer::Value(v)) => seen == v,
            (RegisterSeen::ReadAny, RegisterAnswer::Value(_)) => true,
            (RegisterSeen::Written, RegisterAnswer::Written) => true,
            (RegisterSeen::Cas(seen), RegisterAnswer::Cas(applied)) => seen == applied,
            _ => false,
        }
    }

    fn no_effect(&self, _: &RegisterOp, recorded: &RegisterSeen) -> bool {
        *recorded == RegisterSeen::Failed
    }

    /// Reads and failed compare-and-sets never change the register.
    fn settled_when_idle(&self, _: &RegisterOp, recorded: &RegisterSeen) -> bool {
        matches!(
            recorded,
            RegisterSeen::Read(_) | RegisterSeen::ReadAny | RegisterSeen::Cas(false)
        )
    }

    fn describe(&self, state: &Option<i64>) -> String {
        format!("register {}", Value(*state))
    }

    fn refute(&self, ops: &[&OpOf<Self>]) -> Option<String> {
        sources::refute(self.initial, ops)
    }
}

/// A register value, `nil` when unset.
struct Value(Option<i64>);

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("nil"),
        }
    }
}

impl fmt::Display for RegisterOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterOp::Read => f.write_str("read"),
            RegisterOp::Write(v) => write!(f, "write {v}"),
            RegisterOp::Cas { from, to } => write!(f, "cas {from}->{to}"),
        }
    }
}

impl fmt::Display for RegisterSeen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterSeen::Read(v) => write!(f, "ok {}", Value(*v)),
            RegisterSeen::ReadAny => f.write_str("ok (value not recorded)"),
            RegisterSeen::Written => f.write_str("ok"),
            RegisterSeen::Cas(true) => f.write_str("ok"),
            RegisterSeen::Cas(false) => f.write_str("fail (compare failed)"),
            RegisterSeen::Failed => f.write_str("fail"),
        }
    }
}

impl fmt::Display for RegisterAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterAnswer::Value(v) => write!(f, "{}", Value(*v)),
            RegisterAnswer::Written => f.write_str("ok"),
            RegisterAnswer::Cas(true) => f.write_str("ok"),
            RegisterAnswer::Cas(false) => f.write_str("fail (compare failed)"),
        }
    }
}
