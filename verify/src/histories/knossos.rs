//! Format C: a Knossos history, one EDN vector (or list) of op maps.
//!
//! Preprocessed as Knossos's `history/complete` does it: an `:ok` completion's value
//! replaces the invoke's (reads are invoked with `nil`), `:fail` operations had no effect,
//! `:info` and never-completed operations are unknown outcomes, and events of non-client
//! processes (`:nemesis`) are skipped.

use std::collections::BTreeMap;

use super::{
    ParseError,
    edn::{self, Edn},
    multi_register::{Micro, MultiRegister, Txn, TxnSeen},
    mutex::{Mutex, MutexAnswer, MutexOp},
    pairing::{Ending, Pairing},
    register::{Register, RegisterOp, RegisterSeen},
};
use crate::linearizability::{Model, OpOf};

/// How a model's operations are written in Knossos histories.
pub trait KnossosModel: Model {
    /// The input of an invoke of `f` with `value` (`nil` when absent).
    fn input(&self, f: &str, value: &Edn) -> Result<Self::Input, String>;
    /// What an `:ok` completion with `value` says the client saw.
    fn seen(&self, input: &Self::Input, value: &Edn) -> Result<Self::Output, String>;
    /// What a `:fail` completion says: an outcome [`Model::no_effect`] accepts.
    fn failed(&self, input: &Self::Input) -> Self::Output;
}

/// The operations of a history, in invocation order.
pub fn parse<M: KnossosModel>(model: &M, text: &str) -> Result<Vec<OpOf<M>>, ParseError> {
    let mut pairing = Pairing::default();
    for (line, event) in edn::parse_elements(text)? {
        let error = |reason: String| ParseError { line, reason };
        let field = |name: &str| event.get(name).unwrap_or(&Edn::Nil);
        let process = match field("process") {
            Edn::Int(p) => u64::try_from(*p).map_err(|_| error(format!("process {p}")))?,
            Edn::Keyword(_) => continue,
            other => return Err(error(format!(":process {other:?}"))),
        };
        let f = field("f").keyword().unwrap_or_default();
        let value = field("value");
        match field("type").keyword() {
            Some("invoke") => {
                let input = model.input(f, value).map_err(error)?;
                pairing.invoke(line, process, input)?;
            }
            Some("ok") => {
                let seen = model
                    .seen(pairing.pending(line, process)?, value)
                    .map_err(error)?;
                pairing.complete(line, process, Ending::Seen(seen))?;
            }
            Some("fail") => {
                let failed = model.failed(pairing.pending(line, process)?);
                pairing.complete(line, process, Ending::Seen(failed))?;
            }
            Some("info") => pairing.complete(line, process, Ending::Unknown)?,
            other => return Err(error(format!("unexpected :type {other:?}"))),
        }
    }
    Ok(pairing.finish())
}

impl KnossosModel for Register {
    fn input(&self, f: &str, value: &Edn) -> Result<RegisterOp, String> {
        RegisterOp::from_edn(f, value)
    }

    fn seen(&self, input: &RegisterOp, value: &Edn) -> Result<RegisterSeen, String> {
        match (input, value) {
            (RegisterOp::Read, Edn::Nil) => Ok(RegisterSeen::ReadAny),
            (RegisterOp::Read, Edn::Int(v)) => Ok(RegisterSeen::Read(Some(*v))),
            (RegisterOp::Read, _) => Err(format!("a read of {value:?}")),
            (RegisterOp::Write(_), _) => Ok(RegisterSeen::Written),
            (RegisterOp::Cas { .. }, _) => Ok(RegisterSeen::Cas(true)),
        }
    }

    fn failed(&self, _: &RegisterOp) -> RegisterSeen {
        RegisterSeen::Failed
    }
}

impl KnossosModel for Mutex {
    fn input(&self, f: &str, _: &Edn) -> Result<MutexOp, String> {
        match f {
            "acquire" => Ok(MutexOp::Acquire),
            "release" => Ok(MutexOp::Release),
            _ => Err(format!("a mutex has no :{f}")),
        }
    }

    fn seen(&self, _: &MutexOp, _: &Edn) -> Result<MutexAnswer, String> {
        Ok(MutexAnswer::Ok)
    }

    fn failed(&self, _: &MutexOp) -> MutexAnswer {
        MutexAnswer::Refused
    }
}

impl KnossosModel for MultiRegister {
    fn input(&self, f: &str, value: &Edn) -> Result<Txn, String> {
        match f {
            "txn" => txn(value),
            _ => Err(format!("a multi-register has no :{f}")),
        }
    }

    fn seen(&self, _: &Txn, value: &Edn) -> Result<TxnSeen, String> {
        txn(value).map(TxnSeen::Done)
    }

    fn failed(&self, _: &Txn) -> TxnSeen {
        TxnSeen::Failed
    }
}

impl MultiRegister {
    /// Knossos's `(multi-register {:x 0 :y 0})`.
    pub fn knossos() -> Self {
        Self {
            initial: BTreeMap::from([("x".into(), 0), ("y".into(), 0)]),
        }
    }
}

/// `[[:read :x nil] [:write :y 2] ...]`.
fn txn(value: &Edn) -> Result<Txn, String> {
    let Edn::Seq(steps) = value else {
        return Err(format!("a txn needs a list of steps, not {value:?}"));
    };
    let micro = |step: &Edn| match step {
        Edn::Seq(parts) => match parts.as_slice() {
            [Edn::Keyword(f), Edn::Keyword(k), v] if f == "read" => match v {
                Edn::Nil => Ok(Micro::Read(k.clone(), None)),
                Edn::Int(v) => Ok(Micro::Read(k.clone(), Some(*v))),
                _ => Err(format!("a read of {v:?}")),
            },
            [Edn::Keyword(f), Edn::Keyword(k), Edn::Int(v)] if f == "write" => {
                Ok(Micro::Write(k.clone(), *v))
            }
            _ => Err(format!("a txn step {step:?}")),
        },
        _ => Err(format!("a txn step {step:?}")),
    };
    steps.iter().map(micro).collect::<Result<_, _>>().map(Txn)
}
