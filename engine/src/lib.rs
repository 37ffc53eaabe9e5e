//! # coupon-engine
//!
//! A coupon / flash-sale engine on Redis and PostgreSQL that never oversells, and the
//! auditor that proves it (docs/ARCHITECTURE.md, "Layout" through "Invariants").
//!
//! - Claims run one atomic Lua script in Redis (stock, per-user limit, idempotency key) and
//!   are persisted roll-forward in Postgres, synchronously or by a batching persister.
//! - Redemption and refund are single Postgres transactions guarded by conditional UPDATEs
//!   and unique indexes; refunds return the coupon to the user or to stock, never both.
//! - Lost Redis state is rebuilt from Postgres, fenced by a per-template epoch.
//! - [`CouponEngine::audit`] checks invariants I1–I5 against the live state.

pub mod audit;
pub mod config;
pub mod domain;
pub mod error;
pub mod failpoint;
#[cfg(feature = "http")]
pub mod http;
/// The invariant catalogue, the verification core's (one definition for the engine's
/// auditor and every checker).
pub use coupon_verify::invariant;
pub mod persistence;
pub mod redact;
pub mod service;
pub mod store;
pub mod variant;

pub use audit::AuditReport;
pub use config::{DEFAULT_DEADLINE, DEFAULT_SOLD_OUT_RECHECK, EngineConfig, Persistence};
pub use domain::{
    coupon::{Coupon, CouponStatus},
    discount::{Discount, DiscountKind},
    template::{NewTemplate, RefundPolicy, Template, TemplateStatus},
};
pub use error::{EngineError, EngineResult};
pub use invariant::{Finding, Invariant};
pub use service::{
    ClaimReceipt, CouponEngine, Rebuilt, ReconcileOptions, ReconcileReport, Redemption,
    RefundReceipt, StaleAdmissions,
};
pub use store::{postgres::MIGRATOR, redis_conn::RedisTarget};
pub use variant::Variant;
