//! Knossos's multi-register: named registers read and written by transactions, each applied
//! atomically in order.

use std::{collections::BTreeMap, fmt};

use crate::linearizability::{Model, Whole};

/// One step of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Micro {
    /// Read a register; the value seen, where recorded (`None`: not recorded, or the
    /// register does not exist).
    Read(String, Option<i64>),
    /// Write a register.
    Write(String, i64),
}

/// A transaction: what a client asks (reads without values) or saw (reads with them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn(pub Vec<Micro>);

/// What a client saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnSeen {
    /// The transaction committed, with these read values.
    Done(Txn),
    /// It failed and certainly had no effect (Knossos drops these).
    Failed,
}

/// The multi-register model; transactions span registers, so one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiRegister {
    /// The registers and their values before any write.
    pub initial: BTreeMap<String, i64>,
}

impl Model for MultiRegister {
    type Key = Whole;
    type Input = Txn;
    type Output = TxnSeen;
    type Answer = Txn;
    type State = BTreeMap<String, i64>;

    fn partition(&self, _: &Txn) -> Whole {
        Whole
    }

    fn init(&self, _: &Whole) -> Self::State {
        self.initial.clone()
    }

    fn step(&self, state: &Self::State, txn: &Txn) -> (Txn, Option<Self::State>) {
        let mut next = state.clone();
        let answer = txn
            .0
            .iter()
            .map(|micro| match micro {
                Micro::Read(k, _) => Micro::Read(k.clone(), next.get(k).copied()),
                Micro::Write(k, v) => {
                    next.insert(k.clone(), *v);
                    micro.clone()
                }
            })
            .collect();
        let changed = next != *state;
        (Txn(answer), changed.then_some(next))
    }

    /// Every step lines up, and every recorded read value is the one the model reads.
    fn matches(&self, recorded: &TxnSeen, answer: &Txn) -> bool {
        let TxnSeen::Done(recorded) = recorded else {
            return false;
        };
        recorded.0.len() == answer.0.len()
            && recorded.0.iter().zip(&answer.0).all(|pair| match pair {
                (Micro::Read(k, seen), Micro::Read(j, v)) => {
                    k == j && (seen.is_none() || seen == v)
                }
                (Micro::Write(k, a), Micro::Write(j, b)) => k == j && a == b,
                _ => false,
            })
    }

    fn no_effect(&self, _: &Txn, recorded: &TxnSeen) -> bool {
        *recorded == TxnSeen::Failed
    }

    /// Transactions that only read never change the registers.
    fn settled_when_idle(&self, txn: &Txn, _: &TxnSeen) -> bool {
        txn.0.iter().all(|micro| matches!(micro, Micro::Read(..)))
    }

    fn describe(&self, state: &Self::State) -> String {
        let entries: Vec<String> = state.iter().map(|(k, v)| format!("{k}={v}")).collect();
        entries.join(" ")
    }
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (n, micro) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(" ")?;
            }
            match micro {
                Micro::Read(k, Some(v)) => write!(f, "[r {k} {v}]")?,
                Micro::Read(k, None) => write!(f, "[r {k} nil]")?,
                Micro::Write(k, v) => write!(f, "[w {k} {v}]")?,
            }
        }
        f.write_str("]")
    }
}

impl fmt::Display for TxnSeen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnSeen::Done(txn) => write!(f, "ok {txn}"),
            TxnSeen::Failed => f.write_str("fail"),
        }
    }
}
