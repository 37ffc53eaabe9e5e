//! The engine's lookups of `user_coupon` stay index lookups however the table's statistics
//! looked when a connection first ran them: a connection of the engine's pool
//! (`postgres::pool_options`) runs each lookup while the table is analyzed empty, the table
//! then fills, and the statement the connection prepared (read back from
//! `pg_prepared_statements`) is explained on that connection.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_engine::{domain::ids::UserId, store::postgres};
use coupon_testkit::TestEnv;
use sqlx::PgPool;
use uuid::Uuid;

/// Coupons in the table when the lookups are explained.
const ROWS: i64 = 20_000;
/// An index lookup of one coupon touches a handful of pages, a scan of 20,000 coupons
/// a few hundred.
const MAX_BUFFERS: u64 = 30;

/// Buffers `EXPLAIN (ANALYZE, BUFFERS) EXECUTE` of the connection's prepared statement whose
/// text ends with `tail` touches, with `args`, must stay under [`MAX_BUFFERS`].
async fn index_lookup(pg: &PgPool, tail: &str, args: &str) -> anyhow::Result<()> {
    let mut conn = pg.acquire().await?;
    let names: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pg_prepared_statements WHERE statement LIKE $1")
            .bind(format!("%{tail}"))
            .fetch_all(&mut *conn)
            .await?;
    let [name] = names.as_slice() else {
        anyhow::bail!("one prepared statement ending with {tail:?} expected, found {names:?}");
    };
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE {name}({args})"
    )))
    .fetch_all(&mut *conn)
    .await?;
    let buffers = crate::shared_buffers(&plan)
        .ok_or_else(|| anyhow::anyhow!("no buffer counts in the plan: {plan:#?}"))?;
    anyhow::ensure!(
        buffers < MAX_BUFFERS,
        "{buffers} buffers for {tail:?} over {ROWS} coupons: {plan:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn lookups_prepared_on_an_empty_table_still_use_their_indexes() -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    // One connection: every lookup below is prepared, and reused, on it.
    let pg = postgres::pool_options(1).connect(&env.database_url).await?;
    sqlx::query("ALTER TABLE user_coupon SET (autovacuum_enabled = false)")
        .execute(&pg)
        .await?;
    // Empty down to its pages (a deleted row's page would make a scan look costly), as
    // after the migrations of a new deployment.
    sqlx::query("TRUNCATE user_coupon CASCADE")
        .execute(&pg)
        .await?;
    sqlx::query("ANALYZE user_coupon").execute(&pg).await?;
    let user = UserId::parse("lookup-user-7".to_owned()).expect("valid");
    // More than the five custom plans after which Postgres may settle on a generic one.
    for _ in 0..8 {
        assert!(postgres::get_coupon(&pg, Uuid::now_v7()).await?.is_none());
        assert!(postgres::user_coupons(&pg, &user, 50).await?.is_empty());
    }
    sqlx::query(
        "INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id, \
         claimed_at, valid_from, valid_until) \
         SELECT gen_random_uuid(), gen_random_uuid(), 'lookup-user-' || (g % 5000), 'issued', \
                'lookup-' || g, now(), now(), now() + interval '1 day' \
           FROM generate_series(1, $1) AS g",
    )
    .bind(ROWS)
    .execute(&pg)
    .await?;
    index_lookup(
        &pg,
        "FROM user_coupon WHERE id = $1",
        &format!("'{}'", Uuid::now_v7()),
    )
    .await?;
    index_lookup(
        &pg,
        "ORDER BY claimed_at DESC, id LIMIT $2",
        "'lookup-user-7', 50",
    )
    .await?;
    pg.close().await;
    Ok(())
}
