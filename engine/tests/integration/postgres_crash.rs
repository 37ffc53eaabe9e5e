//! Postgres crashes mid-sale (docs/ARCHITECTURE.md, "Group commit"). A claim is answered
//! from its batch's synchronous commit, so every claim acknowledged before an immediate
//! shutdown must be there after crash recovery, and the stock counter must still match the
//! rows.
//! The test runs a Postgres of its own (never the shared one).

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use coupon_engine::{EngineConfig, EngineError, NewTemplate, RefundPolicy};
use coupon_testkit::{Backends, TestEnv, local::LocalPostgres, shared_backends};
use uuid::Uuid;

use crate::{rid, uid};

const SHOPPERS: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_claims_survive_a_postgres_crash() -> anyhow::Result<()> {
    let pg = Arc::new(LocalPostgres::start()?);
    let shared = shared_backends().await?;
    let backends = Arc::new(Backends::with_target(shared.redis.clone(), pg.url(), None));
    let env = TestEnv::on(backends, EngineConfig::default()).await?;
    let engine = env.engine.clone();
    let t = engine
        .create_template(NewTemplate::simple(
            "crash",
            1_000_000,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;

    let acked: Arc<Mutex<Vec<Uuid>>> = Arc::default();
    let crashed = Arc::new(AtomicBool::new(false));
    let acked_after_crash = Arc::new(Mutex::new(0usize));
    let stop = Arc::new(AtomicBool::new(false));
    let mut shoppers = Vec::new();
    for s in 0..SHOPPERS {
        let (engine, acked, crashed, after, stop) = (
            engine.clone(),
            acked.clone(),
            crashed.clone(),
            acked_after_crash.clone(),
            stop.clone(),
        );
        shoppers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let user = format!("s{s}-{n}");
                match engine.claim(t.id, &uid(&user), &rid(&user)).await {
                    Ok(r) => {
                        acked.lock().unwrap().push(r.coupon_id);
                        if crashed.load(Ordering::Relaxed) {
                            *after.lock().unwrap() += 1;
                        }
                    }
                    // While Postgres is down: unknown outcomes, as a client sees them.
                    Err(e) if e.outcome_unknown() => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(EngineError::StockEmpty) => unreachable!("a million in stock"),
                    Err(other) => panic!("claim failed: {other}"),
                }
            }
        }));
    }

    // Ordered by what happened, not by time: a busy machine sells slower, not less.
    let sold_some = until(Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 50
    })
    .await;
    let before_crash = acked.lock().unwrap().len();
    let crash = pg.clone();
    tokio::task::spawn_blocking(move || crash.crash_and_restart()).await??;
    crashed.store(true, Ordering::Relaxed);
    // The pool reconnects and the sale goes on: wait for claims acknowledged after the crash.
    let sold_again = until(Duration::from_secs(60), || {
        *acked_after_crash.lock().unwrap() >= 20
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for s in shoppers {
        s.await?;
    }

    let acked = acked.lock().unwrap().clone();
    assert!(
        sold_some,
        "fewer than 50 claims acknowledged in 60 s before the crash"
    );
    assert!(
        sold_again,
        "fewer than 20 claims acknowledged in 60 s after Postgres came back"
    );
    assert!(
        before_crash > 0,
        "no claim was acknowledged before the crash"
    );
    assert!(
        *acked_after_crash.lock().unwrap() > 0,
        "the engine did not sell again after Postgres came back"
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM user_coupon WHERE id = ANY($1)")
        .bind(&acked)
        .fetch_one(engine.pool())
        .await?;
    assert_eq!(
        stored,
        acked.len() as i64,
        "{} of {} acknowledged claims were lost in the crash",
        acked.len() as i64 - stored,
        acked.len()
    );
    let (counter, rows): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT counted FROM template_stock WHERE template_id = $1), \
                (SELECT count(*) FROM user_coupon WHERE template_id = $1 AND status <> 'revoked')",
    )
    .bind(t.id)
    .fetch_one(engine.pool())
    .await?;
    assert_eq!(counter, rows, "the stock counter disagrees with the rows");
    Ok(())
}

/// Polls `done` until it holds or `limit` passes; whether it held.
async fn until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}
