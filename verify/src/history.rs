//! A Jepsen-style history: every operation recorded as an invoke event and a completion event
//! (`ok` / `fail` / `unknown`) with process id and monotonic timestamps.
//!
//! Processes are sequential: a process has at most one operation in flight. A process whose
//! operation ended `unknown` may still have it take effect later, so the runner retires it and
//! continues with a fresh id from [`ProcessIds`].

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU32, Ordering},
    },
    time::Instant,
};

use serde::{Deserialize, Serialize};

use crate::op::{Op, OpResult, Refusal};

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The client sent the operation.
    Invoke,
    /// Completed with a success result.
    Ok,
    /// Completed with a refusal: definitely no effect.
    Fail,
    /// Timeout or connection error: it may or may not have taken effect, now or later.
    Unknown,
}

/// One entry of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history.
    pub index: usize,
    /// The process (sequential client) the event belongs to.
    pub process: u32,
    /// Invoke or completion.
    pub kind: EventKind,
    /// The operation (repeated on its completion).
    pub op: Op,
    /// The answer: `Some` on `ok` (a success) and `fail` (a refusal), `None` otherwise.
    pub result: Option<OpResult>,
    /// Nanoseconds since the recorder was created; strictly increasing along the history.
    pub at_nanos: u64,
}

/// A recorded history, in the order the events happened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The events, `events[i].index == i`.
    pub events: Vec<Event>,
}

/// How an operation ended, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Completed with this success result.
    Ok(OpResult),
    /// Refused with this refusal; no effect.
    Fail(Refusal),
    /// Unknown or never completed: may take effect at any time after its call, or never.
    Unknown,
}

/// An invocation paired with its completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// The process that ran it.
    pub process: u32,
    /// The operation.
    pub op: Op,
    /// Invocation time (ns).
    pub call: u64,
    /// Completion time (ns); `None` when unknown or never completed.
    pub ret: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Why a history cannot be read as operations (a harness bug, not an engine bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// A completion with no operation in flight on its process.
    #[error("event {index}: completion on process {process}, which has nothing in flight")]
    CompletionWithoutInvoke {
        /// Event index.
        index: usize,
        /// The process.
        process: u32,
    },
    /// An invoke on a process that already has an operation in flight.
    #[error("event {index}: invoke on process {process}, which already has an op in flight")]
    ProcessBusy {
        /// Event index.
        index: usize,
        /// The process.
        process: u32,
    },
    /// An `ok` without a success result, or a `fail` without a refusal.
    #[error("event {index}: {kind:?} completion with result {result:?}")]
    ResultMismatch {
        /// Event index.
        index: usize,
        /// The completion kind.
        kind: EventKind,
        /// The result recorded.
        result: Option<OpResult>,
    },
}

impl History {
    /// Pairs each invoke with the next completion of its process. Invokes never completed
    /// are [`Outcome::Unknown`] with `ret: None`, as are `unknown` completions.
    pub fn operations(&self) -> Result<Vec<Operation>, HistoryError> {
        let mut ops: Vec<Operation> = Vec::new();
        let mut in_flight: HashMap<u32, usize> = HashMap::new();
        for event in &self.events {
            if event.kind == EventKind::Invoke {
                if in_flight.insert(event.process, ops.len()).is_some() {
                    return Err(HistoryError::ProcessBusy {
                        index: event.index,
                        process: event.process,
                    });
                }
                ops.push(Operation {
                    process: event.process,
                    op: event.op.clone(),
                    call: event.at_nanos,
                    ret: None,
                    outcome: Outcome::Unknown,
                });
                continue;
            }
            let slot =
                in_flight
                    .remove(&event.process)
                    .ok_or(HistoryError::CompletionWithoutInvoke {
                        index: event.index,
                        process: event.process,
                    })?;
            if let Some(op) = ops.get_mut(slot) {
                op.outcome = outcome_of(event)?;
                op.ret = (op.outcome != Outcome::Unknown).then_some(event.at_nanos);
            }
        }
        Ok(ops)
    }

    /// The operations grouped by the template they touch (all of one template's operations
    /// only touch that template's state, so each group can be checked on its own).
    pub fn partition_by_template(&self) -> Result<BTreeMap<u32, Vec<Operation>>, HistoryError> {
        let mut parts: BTreeMap<u32, Vec<Operation>> = BTreeMap::new();
        for op in self.operations()? {
            parts.entry(op.op.template()).or_default().push(op);
        }
        Ok(parts)
    }

    /// The history as pretty JSON (written beside a failing case so it can be replayed).
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self)
    }

    /// Reads a history written by [`History::to_json`].
    pub fn from_json(json: &str) -> serde_json::Result<History> {
        serde_json::from_str(json)
    }
}

/// The outcome a completion event records, checking that kind and result agree.
fn outcome_of(event: &Event) -> Result<Outcome, HistoryError> {
    match (event.kind, &event.result) {
        (EventKind::Unknown, _) => Ok(Outcome::Unknown),
        (EventKind::Fail, Some(OpResult::Refused(r))) => Ok(Outcome::Fail(*r)),
        (EventKind::Ok, Some(r)) if r.refusal().is_none() => Ok(Outcome::Ok(r.clone())),
        _ => Err(HistoryError::ResultMismatch {
            index: event.index,
            kind: event.kind,
            result: event.result.clone(),
        }),
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok(result) => write!(f, "ok {result}"),
            Outcome::Fail(refusal) => write!(f, "fail {refusal}"),
            Outcome::Unknown => f.write_str("unknown"),
        }
    }
}

impl fmt::Display for Operation {
    /// `p3 claim t0 by a req r1 [120..450]`; an open-ended interval for unknown outcomes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{} {} [{}..", self.process, self.op, self.call)?;
        match self.ret {
            Some(ret) => write!(f, "{ret}]"),
            None => f.write_str("]"),
        }
    }
}

/// Names an operation in flight; handed back to [`Recorder::complete`] exactly once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an invoked operation must be completed"]
pub struct OpId {
    invoke: usize,
    process: u32,
}

impl OpId {
    /// The process the operation runs on.
    pub fn process(&self) -> u32 {
        self.process
    }
}

/// Thread-safe history recorder shared by all client tasks (clone it freely).
#[derive(Debug, Clone)]
pub struct Recorder {
    log: Arc<Mutex<Log>>,
    origin: Instant,
}

#[derive(Debug, Default)]
struct Log {
    history: History,
    last_nanos: Option<u64>,
}

impl Log {
    /// Appends an event stamped strictly after every earlier one, so that "returned before
    /// invoked" is never ambiguous.
    fn push(&mut self, process: u32, kind: EventKind, op: Op, result: Option<OpResult>, now: u64) {
        let at_nanos = self.last_nanos.map_or(now, |last| now.max(last + 1));
        self.last_nanos = Some(at_nanos);
        let index = self.history.events.len();
        self.history.events.push(Event {
            index,
            process,
            kind,
            op,
            result,
            at_nanos,
        });
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        Self {
            log: Arc::new(Mutex::new(Log::default())),
            origin: Instant::now(),
        }
    }

    /// Records that `process` sends `op`; call right before sending it.
    pub fn invoke(&self, process: u32, op: Op) -> OpId {
        let mut log = self.lock();
        let invoke = log.history.events.len();
        let now = self.now();
        log.push(process, EventKind::Invoke, op, None, now);
        OpId { invoke, process }
    }

    /// Records how the operation `id` ended; call right after the answer (or the error)
    /// arrives. `result` must be a success for `Ok`, a refusal for `Fail`, and `None` for
    /// `Unknown` (after which the runner retires the process). Mismatches are reported by
    /// [`History::operations`]; an id from another recorder is ignored.
    pub fn complete(&self, id: OpId, kind: EventKind, result: Option<OpResult>) {
        let mut log = self.lock();
        let now = self.now();
        let op = log.history.events.get(id.invoke).map(|e| e.op.clone());
        if let Some(op) = op {
            log.push(id.process, kind, op, result, now);
        }
    }

    /// A copy of the history recorded so far.
    pub fn snapshot(&self) -> History {
        self.lock().history.clone()
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        // A panicking client task must not hide the history that explains it.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hands out fresh process ids; a process that saw `unknown` is replaced by a new one.
#[derive(Debug, Default)]
pub struct ProcessIds {
    next: AtomicU32,
}

impl ProcessIds {
    /// An allocator whose first id is 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh process id, never returned before by this allocator.
    pub fn next(&self) -> u32 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::op::CouponRef;

    fn claim(template: u32, req: &str) -> Op {
        Op::Claim {
            template,
            user: "u".into(),
            request_id: req.into(),
        }
    }

    fn claimed(template: u32, req: &str) -> Option<OpResult> {
        Some(OpResult::Claimed {
            coupon: CouponRef {
                template,
                request_id: req.into(),
            },
        })
    }

    #[test]
    fn recorder_pairs_invokes_with_completions() {
        let rec = Recorder::new();
        let a = rec.invoke(0, claim(0, "r1"));
        let b = rec.invoke(1, claim(1, "r2"));
        let c = rec.invoke(2, claim(0, "r3"));
        rec.complete(
            b,
            EventKind::Fail,
            Some(OpResult::Refused(Refusal::StockEmpty)),
        );
        rec.complete(a, EventKind::Ok, claimed(0, "r1"));
        rec.complete(c, EventKind::Unknown, None);
        let _never = rec.invoke(3, claim(1, "r4"));

        let history = rec.snapshot();
        let times: Vec<u64> = history.events.iter().map(|e| e.at_nanos).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
        let ops = history.operations().unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!(ops[0].outcome, Outcome::Ok(claimed(0, "r1").unwrap()));
        assert!(ops[0].ret.unwrap() > ops[0].call);
        assert_eq!(ops[1].outcome, Outcome::Fail(Refusal::StockEmpty));
        assert_eq!(
            (ops[2].outcome.clone(), ops[2].ret),
            (Outcome::Unknown, None)
        );
        assert_eq!(
            (ops[3].outcome.clone(), ops[3].ret),
            (Outcome::Unknown, None)
        );

        let parts = history.partition_by_template().unwrap();
        assert_eq!(parts[&0].len(), 2);
        assert_eq!(parts[&1].len(), 2);
    }

    #[test]
    fn history_round_trips_through_json() {
        let rec = Recorder::new();
        let a = rec.invoke(0, claim(0, "r1"));
        rec.complete(a, EventKind::Ok, claimed(0, "r1"));
        let history = rec.snapshot();
        let back = History::from_json(&history.to_json().unwrap()).unwrap();
        assert_eq!(back, history);
    }

    #[test]
    fn malformed_histories_are_reported() {
        let rec = Recorder::new();
        let a = rec.invoke(0, claim(0, "r1"));
        rec.complete(a, EventKind::Ok, Some(OpResult::Refused(Refusal::Busy)));
        assert!(matches!(
            rec.snapshot().operations(),
            Err(HistoryError::ResultMismatch { index: 1, .. })
        ));

        let rec = Recorder::new();
        let _a = rec.invoke(0, claim(0, "r1"));
        let _b = rec.invoke(0, claim(0, "r2"));
        assert!(matches!(
            rec.snapshot().operations(),
            Err(HistoryError::ProcessBusy {
                index: 1,
                process: 0
            })
        ));
    }

    #[test]
    fn process_ids_are_fresh() {
        let ids = ProcessIds::new();
        assert_eq!((ids.next(), ids.next(), ids.next()), (0, 1, 2));
    }
}

/// Short constructors for tests.
pub mod fixtures {
    use super::{Operation, Outcome};
    use crate::op::Op;

    /// `op` by process 0, called at `call` and answered at `ret` (`None`: never).
    pub fn operation(op: Op, outcome: Outcome, call: u64, ret: Option<u64>) -> Operation {
        Operation {
            process: 0,
            op,
            call,
            ret,
            outcome,
        }
    }
}
