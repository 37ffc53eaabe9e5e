//! The linearizability checker (I8) is the verification core's
//! (`coupon_verify::linearizability`); the engine's model over it ([`coupon`]) lives here,
//! beside the sequential model it wraps.

pub use coupon_verify::linearizability::*;

pub mod coupon;

pub use coupon::{Coupons, Template, check, check_partitioned};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
