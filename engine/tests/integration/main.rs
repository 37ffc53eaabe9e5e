//! The engine's integration tests, against real Redis and Postgres, one module per flow or
//! fault. One binary, not one per file: each test binary is a release compile and link of its
//! own, which made building the tests most of CI's time on two cores.

mod arbiter;
mod batch_plan;
mod claim;
mod containers;
mod http_api;
mod http_trust;
mod openapi_contract;
mod postgres_crash;
mod redeem_refund;
mod redis_cluster;
mod risky_settings;
mod server_start;
mod stale_redis;

use coupon_engine::domain::ids::{RequestId, UserId};

/// A user id the test writes valid.
fn uid(id: impl Into<String>) -> UserId {
    UserId::parse(id).expect("a valid user id")
}

/// A request id the test writes valid.
fn rid(id: impl Into<String>) -> RequestId {
    RequestId::parse(id).expect("a valid request id")
}
