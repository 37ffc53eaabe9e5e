//! Published histories with known verdicts: the formats and their models are the
//! verification core's (`coupon_verify::histories`); the data set's manifest, read from disk,
//! is the harness's.

pub use coupon_verify::histories::*;

pub mod manifest;
