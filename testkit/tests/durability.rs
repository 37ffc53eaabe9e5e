//! A Postgres the testkit starts is a fixture (no flush) unless a durable one is asked for:
//! `coupon-loadtest bench` measures commits and must get one that flushes them. Starts two
//! throwaway clusters of its own (`initdb`/`pg_ctl` from this machine).

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_testkit::local::LocalPostgres;
use sqlx::{Connection, PgConnection};

async fn setting(pg: &LocalPostgres, name: &str) -> String {
    let mut conn = PgConnection::connect(&pg.url()).await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT current_setting('{name}')"
    )))
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_durable_cluster_flushes_its_commits_and_a_fixture_does_not() {
    let durable = LocalPostgres::start_durable().unwrap();
    assert_eq!(setting(&durable, "fsync").await, "on");
    assert_eq!(setting(&durable, "synchronous_commit").await, "on");
    drop(durable);
    let fixture = LocalPostgres::start().unwrap();
    assert_eq!(setting(&fixture, "fsync").await, "off");
}
