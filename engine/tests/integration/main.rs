//! The engine's integration tests, against real Redis and Postgres, one module per flow or
//! fault. One binary, not one per file: each test binary is a release compile and link of its
//! own, which made building the tests most of CI's time on two cores.

mod arbiter;
mod batch_connection;
mod batch_plan;
mod big_rebuild;
mod checkout;
mod claim;
mod claim_decision_sql;
mod cluster_bus;
mod containers;
mod grey_failures;
mod http_api;
mod http_trust;
mod lookup_plans;
mod openapi_contract;
mod pg_failover;
mod postgres_crash;
mod recorded_outcomes;
mod redeem_refund;
mod redis_cluster;
mod risky_settings;
mod slot_migration;
mod sold_out_gate;
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

/// The shared buffers (hit, read, dirtied, written) of the costliest node of an `EXPLAIN
/// (ANALYZE, BUFFERS)` plan, summed: the top node's, which include its children's.
fn shared_buffers(plan: &[String]) -> Option<u64> {
    plan.iter()
        .filter_map(|line| line.trim().strip_prefix("Buffers: shared"))
        .map(|counts| {
            counts
                .split_whitespace()
                .filter_map(|kv| kv.split_once('=').and_then(|(_, v)| v.parse::<u64>().ok()))
                .sum::<u64>()
        })
        .max()
}

/// A template of `stock` coupons, `limit` per user, and its epoch.
pub(crate) async fn sale(
    env: &coupon_testkit::TestEnv,
    pg: &sqlx::PgPool,
    name: &str,
    stock: i64,
    limit: i32,
) -> anyhow::Result<(coupon_engine::Template, i64)> {
    let template = env
        .engine
        .create_template(coupon_engine::NewTemplate::simple(
            name,
            stock,
            limit,
            coupon_engine::RefundPolicy::ReturnToStock,
        ))
        .await?;
    let epoch = sqlx::query_scalar("SELECT epoch FROM template_stock WHERE template_id = $1")
        .bind(template.id)
        .fetch_one(pg)
        .await?;
    Ok((template, epoch))
}

/// A seed for a test's generator, printed by the test so a failure replays.
pub(crate) fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1
}
