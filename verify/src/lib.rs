//! # coupon-verify
//!
//! The verification core (docs/ARCHITECTURE.md, "Verification"): what every generator — the
//! property tests, the load test, `check-history` — feeds and is judged by. Pure: no I/O and
//! no async runtime, so every piece is unit-tested and a saved history replays anywhere.
//!
//! - [`invariant`]: the invariant catalogue (I1–I14) and a finding against one.
//! - [`op`]: operations and results in scenario terms (template indices, coupons named by
//!   the claim that created them).
//! - [`history`]: the Jepsen-style history of invocations and completions, and its recorder.
//! - [`linearizability`]: the I8 checker, a memoised Wing–Gong search per partition over any
//!   sequential model, with time and memory budgets.
//! - [`histories`]: published Jepsen/Porcupine/Knossos history formats and their models.
//! - [`ack`]: the I6/I7 checker, comparing acknowledgements with the final state.
//! - [`one_order`]: the I11 checker, one live order per coupon, and the I4 checker, one
//!   live redemption, from the history.
//! - [`evidence`]: what the history checkers judge, and those checkers, named: the same
//!   for every generator.
//! - [`grants`]: the coupons a history says were granted, which the client-side counts
//!   read.
//! - [`limits`]: the I1 and I3 checkers from acknowledged claims and final holdings.
//! - [`owners`]: the I5 checker, nobody acknowledged acting on another user's coupon.
//! - [`liveness`]: the I9 checkers, every operation answered in time, sold-out stock sold
//!   again.
//! - [`retries`]: the I7 checkers, a repeated request answered as the first was.
//! - [`page`]: a counterexample drawn as an offline HTML page, Porcupine-style.
//! - [`window`]: the I10 checker, no grant outside the claim window by the true clock.
//! - [`validity`]: checker results composed as Jepsen's `checker/compose` does — valid,
//!   invalid or unknown per named checker, merged into one.

pub mod ack;
pub mod evidence;
pub mod grants;
pub mod histories;
pub mod history;
pub mod invariant;
pub mod limits;
pub mod linearizability;
pub mod liveness;
pub mod one_order;
pub mod op;
pub mod owners;
pub mod page;
pub mod retries;
pub mod validity;
pub mod window;

pub use evidence::{Evidence, HISTORY_CHECKERS};
pub use invariant::{Finding, Invariant};
pub use validity::{CheckerResult, Composed, Judgement, Validity};
