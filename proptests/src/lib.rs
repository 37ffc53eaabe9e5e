//! # coupon-proptests
//!
//! The verification harness's pure core (docs/ARCHITECTURE.md, "Verification"): no I/O here,
//! so every piece can be unit-tested and replayed from a saved history.
//!
//! - [`op`]: operations and results in scenario terms (template indices, coupons named by
//!   the claim that created them).
//! - [`history`]: the Jepsen-style history of invocations and completions, and its recorder.
//! - [`model`]: the sequential model of the engine, `step(state, op) -> (result, state)`.
//! - [`linearizability`]: the I8 checker, a memoised Wing–Gong search per partition over any
//!   sequential model; the engine's is one.
//! - [`histories`]: published Jepsen/Porcupine/Knossos histories and their models, to hold
//!   the checker to verdicts nobody here wrote.
//! - [`ack`]: the I6/I7 checker, comparing acknowledgements with the final state.
//! - [`one_order`]: the I11 checker, one live order per coupon, from the history.
//! - [`counterexample_page`]: a violation drawn as an offline page (`check-history --html`,
//!   a failing property case).
//! - [`scenario`], [`run`], [`nemesis`], [`property`]: generated scenarios run for real
//!   against Redis and Postgres, with faults, checked and shrunk.

pub mod ack;
pub mod case_page;
pub mod checkers;
pub mod counterexample_page;
pub mod engine_process;
pub mod histories;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod mutation;
pub mod nemesis;
pub mod one_order;
pub mod op;
pub mod property;
pub mod run;
pub mod scenario;

pub use ack::{FinalCoupon, FinalState, FinalStatus, check_acks};
pub use coupon_engine::{Finding, Invariant};
pub use history::{
    Event, EventKind, History, HistoryError, OpId, Operation, Outcome, ProcessIds, Recorder,
};
pub use linearizability::{Budget, Verdict, check_partitioned};
pub use model::{Effect, State, step};
pub use op::{CouponRef, Op, OpResult, Policy, Refusal, TemplateSpec};
