//! Turns a stream of invoke and completion events into operations, the way all three
//! formats mean it: the position of an event is its time, each process has at most one
//! operation in flight, and an operation never completed is an unknown outcome.

use std::collections::HashMap;

use super::ParseError;
use crate::linearizability::{Completion, TimedOp};

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending<O> {
    /// It completed and its client saw this.
    Seen(O),
    /// `:info`: it may or may not have taken effect.
    Unknown,
}

/// Operations built from events in file order.
#[derive(Debug)]
pub struct Pairing<I, O> {
    ops: Vec<TimedOp<I, O>>,
    /// Operation in flight per process, with the line of its invoke.
    in_flight: HashMap<u64, (usize, usize)>,
    clock: u64,
}

impl<I, O> Default for Pairing<I, O> {
    fn default() -> Self {
        Self {
            ops: Vec::new(),
            in_flight: HashMap::new(),
            clock: 0,
        }
    }
}

impl<I, O> Pairing<I, O> {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// `process` invokes `input` on `line`.
    pub fn invoke(&mut self, line: usize, process: u64, input: I) -> Result<(), ParseError> {
        if let Some((_, since)) = self.in_flight.get(&process) {
            return Err(ParseError {
                line,
                reason: format!(
                    "process {process} invokes while its operation from line {since} is in flight"
                ),
            });
        }
        let call = self.tick();
        self.in_flight.insert(process, (self.ops.len(), line));
        self.ops.push(TimedOp {
            process,
            input,
            call,
            completion: None,
        });
        Ok(())
    }

    /// The input of the operation `process` has in flight, for completions that need it.
    pub fn pending(&self, line: usize, process: u64) -> Result<&I, ParseError> {
        self.in_flight
            .get(&process)
            .and_then(|&(slot, _)| self.ops.get(slot))
            .map(|op| &op.input)
            .ok_or_else(|| ParseError {
                line,
                reason: format!("a completion on process {process}, which has nothing in flight"),
            })
    }

    /// The operation `process` has in flight ends on `line`.
    pub fn complete(
        &mut self,
        line: usize,
        process: u64,
        ending: Ending<O>,
    ) -> Result<(), ParseError> {
        let Some((slot, _)) = self.in_flight.remove(&process) else {
            return Err(ParseError {
                line,
                reason: format!("a completion on process {process}, which has nothing in flight"),
            });
        };
        let at = self.tick();
        if let (Some(op), Ending::Seen(output)) = (self.ops.get_mut(slot), ending) {
            op.completion = Some(Completion { at, output });
        }
        Ok(())
    }

    /// The operations in invocation order; those still in flight have unknown outcomes.
    pub fn finish(self) -> Vec<TimedOp<I, O>> {
        self.ops
    }
}
