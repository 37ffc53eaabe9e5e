//! The engine's integration tests, against real Redis and Postgres, one module per flow or
//! fault. One binary, not one per file: each test binary is a release compile and link of its
//! own, which made building the tests most of CI's time on two cores.

mod arbiter;
mod claim;
mod containers;
mod http_api;
mod http_trust;
mod openapi_contract;
mod postgres_crash;
mod redeem_refund;
mod redis_cluster;
mod server_start;
mod stale_redis;
