//! When a batcher keeps its Postgres connection between batches and when it gives it back
//! (`store/batch_connection.rs`): kept while work keeps coming (through a short lull too),
//! given back when the work stops, when the pool is exhausted and when a batch fails.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use coupon_engine::{
    NewTemplate, RefundPolicy, Template,
    store::{
        arbiter::{Arbitration, Ruling},
        batch_connection::{BatchConnection, LULL},
        postgres,
        redis::PendingIntent,
    },
};
use coupon_testkit::TestEnv;
use sqlx::PgPool;
use uuid::Uuid;

use super::{rid, uid};

/// A sale of `template` whose first batch (request 1) has run on a [`BatchConnection`]
/// over a pool of `size` connections.
struct Sale {
    template: Template,
    epoch: i64,
    pool: PgPool,
    conn: BatchConnection,
    /// Bound by every test to the end: dropped, it hands the case's database back, and
    /// the connections to it are terminated.
    _env: TestEnv,
}

async fn first_batch(size: u32) -> anyhow::Result<Sale> {
    let env = TestEnv::new().await?;
    let template = env
        .engine
        .create_template(NewTemplate::simple(
            "kept connection",
            1_000,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;
    let epoch = sqlx::query_scalar("SELECT epoch FROM template_stock WHERE template_id = $1")
        .bind(template.id)
        .fetch_one(env.engine.pool())
        .await?;
    let pool = postgres::pool_options(size)
        .connect(&env.database_url)
        .await?;
    let mut conn = BatchConnection::new(pool.clone());
    let verdicts = conn
        .decide(
            &template,
            &[intent(&template, epoch, 1)],
            Arbitration::Enforced,
        )
        .await?;
    assert_eq!(verdicts, vec![Ruling::Stored]);
    Ok(Sale {
        template,
        epoch,
        pool,
        conn,
        _env: env,
    })
}

fn intent(template: &Template, epoch: i64, n: u32) -> PendingIntent {
    PendingIntent {
        template_id: template.id,
        request_id: rid(format!("kept-{n}")),
        coupon_id: Uuid::now_v7(),
        user_id: uid(format!("kept-user-{n}")),
        epoch,
        claimed_at_ms: 1_700_000_000_000,
    }
}

/// How many backends of `pool`'s database last ran the batch function (read on a connection
/// of `pool` that ran none).
async fn backends_that_ran_a_batch(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND query LIKE '%coupon_decide_claims%' AND pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await?)
}

/// Runs a second batch (request 2) on `conn` and checks it ran where the first one did.
async fn second_batch_on_the_first_backend(
    conn: &mut BatchConnection,
    pool: &PgPool,
    template: &Template,
    epoch: i64,
) -> anyhow::Result<()> {
    conn.decide(
        template,
        &[intent(template, epoch, 2)],
        Arbitration::Enforced,
    )
    .await?;
    assert_eq!(
        backends_that_ran_a_batch(pool).await?,
        1,
        "the second batch ran on the first batch's backend"
    );
    Ok(())
}

/// Whether `pool` has `n` idle connections within a second (the pool takes a connection
/// back on a task of its own, after its drop).
async fn idle_soon(pool: &PgPool, n: usize) -> bool {
    for _ in 0..100 {
        if pool.num_idle() == n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn back_to_back_batches_keep_the_connection_until_the_work_stops() -> anyhow::Result<()> {
    let Sale {
        template,
        epoch,
        pool,
        mut conn,
        _env,
    } = first_batch(3).await?;
    conn.between_batches(true);
    assert!(
        conn.holds_one(),
        "more work waits and the pool has room: kept"
    );
    assert_eq!(
        pool.num_idle(),
        0,
        "the kept connection is not idle in the pool"
    );
    // Someone else takes a connection meanwhile: a connection given back would be theirs
    // (once back in the idle queue, which a task of the pool does after the drop; hence the
    // pause), and the second batch would then run on a backend of its own.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = pool.acquire().await?;
    second_batch_on_the_first_backend(&mut conn, &pool, &template, epoch).await?;
    drop(other);
    conn.between_batches(false);
    assert!(!conn.holds_one(), "no work waits: given back");
    assert!(
        idle_soon(&pool, pool.size() as usize).await,
        "every connection, the batcher's too, is back in the pool"
    );
    Ok(())
}

#[tokio::test]
async fn an_exhausted_pool_gets_the_connection_back() -> anyhow::Result<()> {
    let Sale {
        pool,
        mut conn,
        _env,
        ..
    } = first_batch(2).await?;
    let other = pool.acquire().await?;
    conn.between_batches(true);
    assert!(
        !conn.holds_one(),
        "every connection open and none idle: given back even with work waiting"
    );
    let third = tokio::time::timeout(Duration::from_secs(1), pool.acquire()).await;
    assert!(
        third.is_ok(),
        "someone else gets the batcher's connection at once"
    );
    drop(other);
    Ok(())
}

#[tokio::test]
async fn a_failed_batch_gives_its_connection_back() -> anyhow::Result<()> {
    let Sale {
        template,
        epoch,
        pool,
        mut conn,
        _env,
    } = first_batch(2).await?;
    // A template with no stock row: the batch function raises.
    let mut unknown = template.clone();
    unknown.id = Uuid::now_v7().into();
    let mut stray = intent(&template, epoch, 2);
    stray.template_id = unknown.id;
    let failed = conn.decide(&unknown, &[stray], Arbitration::Enforced).await;
    assert!(
        failed.is_err(),
        "a template without a stock row fails its batch"
    );
    assert!(
        !conn.holds_one(),
        "the failed batch's connection is not kept"
    );
    assert!(
        idle_soon(&pool, 1).await,
        "the connection is back in the pool"
    );
    Ok(())
}

#[tokio::test]
async fn a_lull_shorter_than_the_pause_keeps_the_connection_and_a_longer_one_gives_it_back()
-> anyhow::Result<()> {
    let Sale {
        template,
        epoch,
        pool,
        mut conn,
        _env,
    } = first_batch(3).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let send_later = |after: Duration, n: u32| {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            tx.send(n).await.unwrap();
        })
    };
    // On the test's one-thread runtime the sender runs only once `next_message` waits: the
    // claim arrives during the lull, never before it.
    send_later(Duration::ZERO, 2);
    let next = conn.next_message(&mut rx).await;
    assert_eq!(next, Some(2), "the next batch's first claim");
    assert!(
        conn.holds_one(),
        "work came within the lull: the connection was kept through it"
    );
    second_batch_on_the_first_backend(&mut conn, &pool, &template, epoch).await?;
    send_later(LULL * 10, 3);
    let next = conn.next_message(&mut rx).await;
    assert_eq!(next, Some(3));
    assert!(
        !conn.holds_one(),
        "the queue stayed dry past the lull: the connection was given back"
    );
    let nothing = conn.next_message_within(&mut rx, LULL).await;
    assert!(nothing.is_err(), "nothing came within the idle time");
    drop(tx);
    assert_eq!(
        conn.next_message(&mut rx).await,
        None,
        "every sender gone: the queue is closed"
    );
    Ok(())
}
