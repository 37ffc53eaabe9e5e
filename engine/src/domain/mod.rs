//! Pure domain types and rules: no I/O here.

pub mod coupon;
pub mod discount;
pub mod ids;
pub mod template;
