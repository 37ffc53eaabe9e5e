//! # coupon-proptests
//!
//! The property tests (docs/ARCHITECTURE.md, "Verification"): generated scenarios run for
//! real against Redis and Postgres, with faults, judged by the verification core
//! (`coupon-verify`: the history, the invariants, the linearizability search, the published
//! history formats, composed results), whose modules are re-exported here under their names.
//!
//! - [`model`]: the sequential model of the engine, `step(state, op) -> (result, state)`.
//! - [`linearizability`]: the core's I8 checker, with the engine's model over it.
//! - [`histories`]: the core's published history formats, with the data set's manifest.
//! - [`counterexample_page`]: a violation drawn as an offline page (`check-history --html`,
//!   a failing property case).
//! - [`scenario`], [`run`], [`nemesis`], [`property`]: generated scenarios run for real
//!   against Redis and Postgres, with faults, checked and shrunk.

pub mod case_page;
pub mod checkers;
pub mod counterexample_page;
pub mod engine_process;
pub mod histories;
pub mod linearizability;
pub mod model;
pub mod mutation;
pub mod nemesis;
pub mod property;
pub mod run;
pub mod scenario;

pub use coupon_verify::{ack, history, one_order, op, validity};

pub use ack::{FinalCoupon, FinalState, FinalStatus, check_acks};
pub use coupon_verify::{Finding, Invariant};
pub use history::{
    Event, EventKind, History, HistoryError, OpId, Operation, Outcome, ProcessIds, Recorder,
};
pub use linearizability::{Budget, Verdict, check_partitioned};
pub use model::{Effect, State, step};
pub use op::{CouponRef, Op, OpResult, Policy, Refusal, TemplateSpec};
