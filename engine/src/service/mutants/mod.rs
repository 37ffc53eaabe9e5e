//! The defect mutants (feature `mutants`; docs/ARCHITECTURE.md, "Mutants"). Each is the broken
//! counterpart of one step of the real engine, one file per flow as in its parent `service/`. Never
//! enable in production.
//!
//! One seam: a hook is called inside the step it changes and never calls back into the
//! engine, so no engine function exists only for a mutant to call. Most hooks have one
//! shape, `async fn(engine, the step's inputs) -> Option<EngineResult<T>>`, called first
//! thing in the step they can replace: `None` (every other variant) runs the engine's own
//! step untouched; `Some` is the mutant's answer instead. The rest change the step's input
//! and let it run: D7's and D5b's claim keys (`claim_key`, `retry_key`), D5's intent dropped
//! before it is persisted (`before_persist`). A mutant reaches the
//! stores only through store functions, so it writes the schema and the Redis records the
//! engine writes, and differs from the engine only in its defect.
//!
//! D8 and D9 are not here: they change how the claim batch is decided and answered
//! (`Variant::arbitration`, `Variant::waits_for_durability`), inside the arbiter and the
//! batcher.

mod checkout;
mod claim;
mod identity;
mod persister;
mod rebuild;
mod redeem;
mod refund;
mod sold_out;

pub(crate) use checkout::{Lock, lock, release};
pub(crate) use claim::{admit, before_persist, claim_key, retry_key};
pub(crate) use identity::{check_new_server, forgets_rebuilds, identity_change};
pub(crate) use persister::write_acknowledged;
pub(crate) use rebuild::rebuild;
pub(crate) use redeem::{Redeem, deduction, redeem};
pub(crate) use refund::refund;
pub(crate) use sold_out::{keeps_gate_closed, sold_out_says};
