//! The two stores: Redis (hot counters, scripts, locks) and Postgres (the record).
//! Stores know nothing of HTTP; the service composes them.

pub mod arbiter;
pub mod batch_connection;
pub mod cluster_nodes;
pub mod keys;
pub mod postgres;
pub mod records;
pub mod redis;
pub mod redis_conn;
