//! Test environments take their databases from reused slots (`case_db.rs`): each new one
//! must still start empty, with restarted sequences and the template's shape, and two held
//! at once must never share a database. Needs the services of `COUPON_DATABASE_URL` and
//! `COUPON_REDIS_URL` (or another provisioning way).

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_testkit::TestEnv;
use sqlx::{Connection, PgConnection};

async fn connect(env: &TestEnv) -> PgConnection {
    PgConnection::connect(&env.database_url).await.unwrap()
}

async fn oid(conn: &mut PgConnection) -> i64 {
    count(
        conn,
        "SELECT oid::bigint FROM pg_database WHERE datname = current_database()",
    )
    .await
}

async fn count(conn: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(conn)
        .await
        .unwrap()
}

/// A template and its stock row (which references it: emptying must respect the order).
async fn leave_a_row(conn: &mut PgConnection) {
    sqlx::query(
        "WITH t AS (INSERT INTO coupon_template (id, name, total_stock, per_user_limit, \
                    discount_kind, discount_amount, valid_days, refund_policy) \
                    VALUES (gen_random_uuid(), 'left behind', 10, 1, 'fixed', 100, 7, \
                            'return_to_user') RETURNING id) \
         INSERT INTO template_stock (template_id, total_stock) SELECT id, 10 FROM t",
    )
    .execute(conn)
    .await
    .unwrap();
}

/// One test, not several: the slots are shared by every test of this binary, and the point
/// is that the second environment gets the slot the first one dirtied.
#[tokio::test]
async fn a_reused_database_starts_empty_and_in_the_templates_shape() {
    const NEXT_EPOCH: &str = "SELECT nextval('coupon_epoch_seq')";
    let (dirty_url, dirty_oid, first_epoch) = {
        let env = TestEnv::new().await.unwrap();
        let mut c = connect(&env).await;
        let dirty_oid = oid(&mut c).await;
        // Whatever the template's sequence says (a migration set it): every holder's first.
        let first_epoch = count(&mut c, NEXT_EPOCH).await;
        leave_a_row(&mut c).await;
        for _ in 0..3 {
            sqlx::query(NEXT_EPOCH).execute(&mut c).await.unwrap();
        }
        sqlx::query("CREATE TABLE left_behind (id int)")
            .execute(&mut c)
            .await
            .unwrap();
        // A connection still open when the environment goes, as a killed server leaves.
        std::mem::forget(c);
        (env.database_url.clone(), dirty_oid, first_epoch)
    };
    let again = TestEnv::new().await.unwrap();
    assert_eq!(
        again.database_url, dirty_url,
        "the freed slot is taken first"
    );
    let mut c = connect(&again).await;
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM coupon_template").await,
        0
    );
    assert_eq!(
        count(
            &mut c,
            "SELECT count(*) FROM pg_class WHERE relname = 'left_behind'"
        )
        .await,
        0,
    );
    let copied_oid = oid(&mut c).await;
    assert_ne!(
        copied_oid, dirty_oid,
        "a slot that gained a table is copied again"
    );
    assert_eq!(count(&mut c, NEXT_EPOCH).await, first_epoch);

    // Emptied, not copied: rows and a sequence only.
    leave_a_row(&mut c).await;
    sqlx::query(NEXT_EPOCH).execute(&mut c).await.unwrap();
    let reused_url = again.database_url.clone();
    drop(c);
    drop(again);
    let third = TestEnv::new().await.unwrap();
    assert_eq!(third.database_url, reused_url);
    let mut c = connect(&third).await;
    assert_eq!(
        oid(&mut c).await,
        copied_oid,
        "a slot with rows only is emptied in place"
    );
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM coupon_template").await,
        0
    );
    assert_eq!(count(&mut c, NEXT_EPOCH).await, first_epoch);
    let migrations = count(&mut c, "SELECT count(*) FROM _sqlx_migrations").await;
    assert!(migrations > 0, "the migration log is kept");

    let concurrent = TestEnv::new().await.unwrap();
    assert_ne!(
        concurrent.database_url, third.database_url,
        "two environments held at once share a database"
    );
}
