//! Claim flow against real Redis and Postgres: idempotency, limits, concurrency, rebuild,
//! persistence failures and async mode.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{sync::Arc, time::Duration};

use coupon_engine::{
    CouponStatus, EngineConfig, EngineError, NewTemplate, Persistence, ReconcileOptions,
    RefundPolicy, TemplateStatus,
    failpoint::{FailAction, Failpoint, Gate},
    store::postgres,
};
use coupon_testkit::TestEnv;
use futures::future::join_all;
use uuid::Uuid;

use coupon_engine::domain::ids::{RequestId, UserId};

use crate::{rid, uid};

type R = anyhow::Result<()>;

fn template(stock: i64, limit: i32) -> NewTemplate {
    NewTemplate::simple("t", stock, limit, RefundPolicy::ReturnToUser)
}

#[tokio::test]
async fn a_claim_issues_a_coupon_and_a_retry_returns_the_same_one() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let t = e.create_template(template(5, 2)).await?;
    let first = e.claim(t.id, &uid("alice"), &rid("req-1")).await?;
    assert_eq!(first.remaining_stock, 4);
    assert!(!first.replay);
    let again = e.claim(t.id, &uid("alice"), &rid("req-1")).await?;
    assert_eq!(again.coupon_id, first.coupon_id);
    assert!(again.replay);
    assert_eq!(e.remaining_stock(t.id).await?, Some(4));
    let coupons = e.user_coupons(&uid("alice")).await?;
    assert_eq!(coupons.len(), 1);
    assert_eq!(coupons[0].status, CouponStatus::Issued);
    assert!(e.audit(t.id).await?.ok());
    Ok(())
}

/// One index on (user_id, template_id) serves both the per-user limit of one template and
/// a user's coupons across templates: the limit counts only the template claimed from, and
/// the listing still comes newest first.
#[tokio::test]
async fn a_users_coupons_span_templates_newest_first_and_limits_stay_per_template() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let mut claimed = Vec::new();
    for n in 0..3 {
        let t = e.create_template(template(5, 1)).await?;
        let c = e.claim(t.id, &uid("dana"), &rid(format!("d{n}"))).await?;
        assert!(matches!(
            e.claim(t.id, &uid("dana"), &rid(format!("d{n}-again")))
                .await,
            Err(EngineError::UserLimit { limit: 1 })
        ));
        claimed.push(c.coupon_id);
        // claimed_at has millisecond resolution: keep the three apart.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let listed: Vec<Uuid> = e
        .user_coupons(&uid("dana"))
        .await?
        .iter()
        .map(|c| c.id)
        .collect();
    claimed.reverse();
    assert_eq!(listed, claimed);
    Ok(())
}

#[tokio::test]
async fn refusals_are_precise_and_change_nothing() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let t = e.create_template(template(2, 1)).await?;
    e.claim(t.id, &uid("alice"), &rid("a1")).await?;
    assert!(matches!(
        e.claim(t.id, &uid("alice"), &rid("a2")).await,
        Err(EngineError::UserLimit { limit: 1 })
    ));
    e.claim(t.id, &uid("bob"), &rid("b1")).await?;
    assert!(matches!(
        e.claim(t.id, &uid("carol"), &rid("c1")).await,
        Err(EngineError::StockEmpty)
    ));
    assert!(matches!(
        e.claim(Uuid::new_v4().into(), &uid("bob"), &rid("b1"))
            .await,
        Err(EngineError::NotFound(_))
    ));
    // Another user reusing alice's request id gets neither her coupon nor a new one.
    let t2 = e.create_template(template(5, 1)).await?;
    e.claim(t2.id, &uid("alice"), &rid("shared")).await?;
    let err = e
        .claim(t2.id, &uid("bob"), &rid("shared"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    // Bad ids are refused where they are parsed, so no claim can run with them.
    for (user, request) in [
        ("", "r"),
        ("bad|user", "r"),
        ("bob", ""),
        ("bob", "has space"),
    ] {
        let parsed = UserId::parse(user).and_then(|_| RequestId::parse(request));
        let err = EngineError::from(parsed.expect_err("refused"));
        assert_eq!(err.code(), "invalid_request", "{user:?} {request:?}");
    }
    assert_eq!(e.remaining_stock(t2.id).await?, Some(4));
    e.set_template_status(t2.id, TemplateStatus::Paused).await?;
    assert_eq!(
        e.claim(t2.id, &uid("carol"), &rid("c1"))
            .await
            .unwrap_err()
            .code(),
        "invalid_state"
    );
    assert_eq!(e.remaining_stock(t2.id).await?, Some(4));
    assert!(e.audit(t.id).await?.ok());
    assert!(e.audit(t2.id).await?.ok());
    Ok(())
}

#[tokio::test]
async fn bad_templates_are_refused_and_nothing_is_stored() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    for bad in [template(0, 1), template(-3, 1), template(10, 0)] {
        assert_eq!(
            e.create_template(bad).await.unwrap_err().code(),
            "invalid_request"
        );
    }
    assert!(postgres::template_ids(e.pool()).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn claim_window_is_enforced() -> R {
    let env = TestEnv::new().await?;
    let now = time::OffsetDateTime::now_utc();
    let mut spec = template(5, 1);
    spec.claim_starts_at = Some(now + time::Duration::hours(1));
    let t = env.engine.create_template(spec).await?;
    assert_eq!(
        env.engine
            .claim(t.id, &uid("a"), &rid("r"))
            .await
            .unwrap_err()
            .code(),
        "invalid_state"
    );
    Ok(())
}

#[tokio::test]
async fn five_hundred_racing_users_get_exactly_the_stock() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(50, 1)).await?;
    let barrier = Arc::new(tokio::sync::Barrier::new(500));
    let tasks = (0..500).map(|i| {
        let (e, b) = (e.clone(), barrier.clone());
        tokio::spawn(async move {
            b.wait().await;
            e.claim(t.id, &uid(format!("user{i}")), &rid(format!("req{i}")))
                .await
        })
    });
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let empty = results
        .iter()
        .filter(|r| matches!(r, Err(EngineError::StockEmpty)))
        .count();
    assert_eq!(
        (ok, empty),
        (50, 450),
        "{:?}",
        results
            .iter()
            .find(|r| r.is_err() && !matches!(r, Err(EngineError::StockEmpty)))
    );
    assert_eq!(postgres::template_coupons(e.pool(), t.id).await?.len(), 50);
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{audit:?}");
    assert_eq!(audit.redis_stock, Some(0));
    Ok(())
}

#[tokio::test]
async fn one_user_racing_twenty_claims_gets_the_limit() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(100, 3)).await?;
    let barrier = Arc::new(tokio::sync::Barrier::new(20));
    let tasks = (0..20).map(|i| {
        let (e, b) = (e.clone(), barrier.clone());
        tokio::spawn(async move {
            b.wait().await;
            e.claim(t.id, &uid("greedy"), &rid(format!("r{i}"))).await
        })
    });
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    assert_eq!(
        results
            .iter()
            .filter(|r| matches!(r, Err(EngineError::UserLimit { .. })))
            .count(),
        17
    );
    assert_eq!(e.user_coupons(&uid("greedy")).await?.len(), 3);
    assert!(e.audit(t.id).await?.ok());
    Ok(())
}

#[tokio::test]
async fn lost_redis_keys_are_rebuilt_without_oversell_or_limit_bypass() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(30, 2)).await?;
    for i in 0..10 {
        e.claim(t.id, &uid(format!("u{i}")), &rid(format!("a{i}")))
            .await?;
    }
    e.claim(t.id, &uid("u0"), &rid("a-extra")).await?;
    // As after a Redis restart without persistence: this template's keys are gone.
    assert!(e.redis().drop_template_keys(t.id).await? > 0);
    let audit = e.audit(t.id).await?;
    assert_eq!(audit.redis_stock, None);
    assert_eq!(
        e.claim(t.id, &uid("u0"), &rid("a-third"))
            .await
            .unwrap_err()
            .code(),
        "user_limit"
    );
    // A retry of an acknowledged claim still gets its coupon, not a second one.
    let replay = e.claim(t.id, &uid("u1"), &rid("a1")).await?;
    assert_eq!(e.user_coupons(&uid("u1")).await?.len(), 1);
    assert_eq!(replay.coupon_id, e.user_coupons(&uid("u1")).await?[0].id);
    let tasks = (0..100).map(|i| {
        let e = e.clone();
        tokio::spawn(async move {
            e.claim(t.id, &uid(format!("v{i}")), &rid(format!("b{i}")))
                .await
        })
    });
    let ok = join_all(tasks)
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Ok(_))))
        .count();
    assert_eq!(ok, 30 - 11);
    // Sold out now: a retry of an acknowledged claim still gets its coupon, not stock_empty.
    assert!(e.redis().drop_template_keys(t.id).await? > 0);
    assert_eq!(
        e.claim(t.id, &uid("u2"), &rid("a2")).await?.coupon_id,
        e.user_coupons(&uid("u2")).await?[0].id
    );
    assert_eq!(
        e.claim(t.id, &uid("u0"), &rid("a-extra")).await?.coupon_id,
        e.user_coupons(&uid("u0")).await?[0].id
    );
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{audit:?}");
    assert_eq!((audit.redis_stock, audit.counted), (Some(0), 30));
    Ok(())
}

#[tokio::test]
async fn a_claim_fenced_by_a_rebuild_is_not_persisted() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(3, 1)).await?;
    // The claim is deducted, then stalls before its INSERT while Redis loses the template
    // and a rebuild counts without it (docs/ARCHITECTURE.md, "Rebuild and fencing").
    let gate = Gate::new();
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Block(gate.clone()));
    let slow = {
        let e = e.clone();
        tokio::spawn(async move { e.claim(t.id, &uid("slow"), &rid("s1")).await })
    };
    gate.reached(1).await;
    e.redis().drop_template_keys(t.id).await?;
    let other = env.another_engine(EngineConfig::default()).await?;
    for i in 0..3 {
        let _ = other
            .claim(t.id, &uid(format!("o{i}")), &rid(format!("o{i}")))
            .await;
    }
    e.failpoints().disarm(Failpoint::ClaimAfterRedis);
    gate.open();
    let slow = slow.await?;
    let audit = e.audit(t.id).await?;
    assert!(audit.counted <= 3, "oversold: {audit:?}");
    assert!(audit.ok(), "{audit:?}");
    // The fenced claim fails unacknowledged, and its retry is refused: the stock is gone.
    assert_eq!(slow.unwrap_err().code(), "unavailable");
    assert_eq!(
        e.claim(t.id, &uid("slow"), &rid("s1"))
            .await
            .unwrap_err()
            .code(),
        "stock_empty"
    );
    assert!(e.user_coupons(&uid("slow")).await?.is_empty());
    Ok(())
}

/// The reconciler's drift check reads the counter row and what is in flight, not every
/// coupon: it must still see a Redis stock off by one either way, and count a claim in
/// flight (admitted by Redis, not yet stored) on neither side.
#[tokio::test]
async fn the_reconciler_reports_a_redis_stock_that_disagrees_with_postgres() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 1)).await?;
    e.claim(t.id, &uid("alice"), &rid("r1")).await?;
    let now = ReconcileOptions {
        min_pending_age: Duration::from_secs(3600),
    };
    // A claim Redis admitted whose row is not stored yet: in flight, not drift.
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Error(1));
    assert!(e.claim(t.id, &uid("bob"), &rid("r2")).await.is_err());
    assert!(e.reconcile_with(now).await?.drift.is_empty());
    let stock_key = e.redis().keys(t.id).stock;
    for wrong in [4, 2] {
        redis::cmd("SET")
            .arg(&stock_key)
            .arg(wrong)
            .query_async::<()>(&mut e.redis().connection())
            .await?;
        let drift = e.reconcile_with(now).await?.drift;
        assert_eq!(drift.len(), 1, "{drift:?}");
        assert_eq!(
            (drift[0].redis_stock, drift[0].expected_stock),
            (Some(wrong), 3)
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_postgres_failure_after_the_deduct_is_rolled_forward_once() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 1)).await?;
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Error(1));
    let err = e.claim(t.id, &uid("alice"), &rid("r1")).await.unwrap_err();
    assert!(err.outcome_unknown());
    assert!(e.user_coupons(&uid("alice")).await?.is_empty());
    assert_eq!(e.audit(t.id).await?.pending, 1);
    let report = e
        .reconcile_with(ReconcileOptions {
            min_pending_age: Duration::ZERO,
        })
        .await?;
    assert_eq!(report.pending_persisted, 1);
    assert!(report.drift.is_empty(), "{report:?}");
    let coupons = e.user_coupons(&uid("alice")).await?;
    assert_eq!(coupons.len(), 1);
    // The client's retry lands on the same coupon; a second reconcile changes nothing.
    assert_eq!(
        e.claim(t.id, &uid("alice"), &rid("r1")).await?.coupon_id,
        coupons[0].id
    );
    e.reconcile_with(ReconcileOptions {
        min_pending_age: Duration::ZERO,
    })
    .await?;
    assert_eq!(e.user_coupons(&uid("alice")).await?.len(), 1);
    let audit = e.audit(t.id).await?;
    assert!(audit.ok() && audit.pending == 0, "{audit:?}");
    Ok(())
}

#[tokio::test]
async fn a_reconcile_pass_settles_every_live_template_once() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(e.create_template(template(5, 1)).await?.id);
    }
    // One claim a template deducted in Redis and failed before Postgres: six pending intents
    // that only the reconciler settles, over more templates than it reconciles at once.
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Error(6));
    for (i, t) in ids.iter().enumerate() {
        let (user, request) = (uid(format!("u{i}")), rid(format!("r{i}")));
        let err = e.claim(*t, &user, &request).await.unwrap_err();
        assert!(err.outcome_unknown(), "{err}");
    }
    let report = e
        .reconcile_with(ReconcileOptions {
            min_pending_age: Duration::ZERO,
        })
        .await?;
    assert_eq!(report.templates, 6, "{report:?}");
    assert_eq!(report.pending_persisted, 6, "{report:?}");
    assert_eq!(report.pending_dropped, 0, "{report:?}");
    assert!(report.drift.is_empty(), "{report:?}");
    for (i, t) in ids.iter().enumerate() {
        assert_eq!(e.user_coupons(&uid(format!("u{i}"))).await?.len(), 1);
        let audit = e.audit(*t).await?;
        assert!(audit.ok() && audit.pending == 0, "{audit:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_retry_while_the_first_attempt_is_pending_persists_it() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 1)).await?;
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Error(1));
    assert!(e.claim(t.id, &uid("alice"), &rid("r1")).await.is_err());
    let retry = e.claim(t.id, &uid("alice"), &rid("r1")).await?;
    assert!(retry.replay);
    assert!(e.coupon(retry.coupon_id).await?.is_some());
    let audit = e.audit(t.id).await?;
    assert!(audit.ok() && audit.pending == 0, "{audit:?}");
    Ok(())
}

#[tokio::test]
async fn async_mode_drains_every_acknowledged_claim() -> R {
    let env = TestEnv::with_config(EngineConfig {
        persistence: Persistence::Async,
        ..EngineConfig::default()
    })
    .await?;
    let e = env.engine.clone();
    let t = e.create_template(template(200, 1)).await?;
    let tasks = (0..300).map(|i| {
        let e = e.clone();
        tokio::spawn(async move {
            e.claim(t.id, &uid(format!("u{i}")), &rid(format!("r{i}")))
                .await
        })
    });
    let acked: Vec<Uuid> = join_all(tasks)
        .await
        .into_iter()
        .filter_map(|r| r.ok()?.ok().map(|c| c.coupon_id))
        .collect();
    assert_eq!(acked.len(), 200);
    e.shutdown().await;
    let stored = postgres::template_coupons(e.pool(), t.id).await?;
    assert_eq!(stored.len(), 200);
    assert!(acked.iter().all(|id| stored.iter().any(|c| c.id == *id)));
    let audit = e.audit(t.id).await?;
    assert!(audit.ok() && audit.pending == 0, "{audit:?}");
    Ok(())
}

/// Async mode's price, visible: each claim acknowledged from Redis that Postgres then refuses
/// is counted (`coupon_async_acks_refused_total`), one for each acknowledged coupon that never
/// reaches Postgres.
#[tokio::test]
async fn acknowledged_async_claims_postgres_refuses_are_counted() -> R {
    let env = TestEnv::with_config(EngineConfig {
        persistence: Persistence::Async,
        ..EngineConfig::default()
    })
    .await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 1)).await?;
    // Postgres's stock shrinks behind Redis's back, as if Redis had come back stale: Redis
    // admits five, Postgres has room for three.
    sqlx::query("UPDATE template_stock SET total_stock = 3 WHERE template_id = $1")
        .bind(t.id)
        .execute(e.pool())
        .await?;
    let mut acked = Vec::new();
    for i in 0..5 {
        let (user, request) = (uid(format!("u{i}")), rid(format!("r{i}")));
        acked.push(e.claim(t.id, &user, &request).await?.coupon_id);
    }
    e.shutdown().await;
    let stored = postgres::template_coupons(e.pool(), t.id).await?;
    let lost = acked
        .iter()
        .filter(|id| !stored.iter().any(|c| c.id == **id))
        .count();
    assert_eq!((stored.len(), lost), (3, 2));
    assert_eq!(e.acknowledged_claims_refused(), 2);
    Ok(())
}

#[tokio::test]
async fn the_reconciler_counts_the_acknowledged_async_claims_postgres_refuses() -> R {
    // Intents a server admitted and acknowledged, then died before its persister took them:
    // another server's reconciler decides them, and its refusals are lost acknowledgements
    // as much as the persister's are.
    let env = TestEnv::with_config(EngineConfig {
        persistence: Persistence::Async,
        ..EngineConfig::default()
    })
    .await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 2)).await?;
    let first = e.claim(t.id, &uid("u0"), &rid("r0")).await?;
    e.flush().await?;
    sqlx::query("UPDATE template_stock SET total_stock = 3 WHERE template_id = $1")
        .bind(t.id)
        .execute(e.pool())
        .await?;
    let redis = e.redis();
    redis.load_scripts().await?;
    let admit = |user: &'static str, request: &'static str| {
        let (redis, user, request) = (redis.clone(), uid(user), rid(request));
        async move {
            redis
                .claim(t.id, &request, &user, 2, Uuid::now_v7(), 0, 60)
                .await
        }
    };
    // r0's record is gone (expired, evicted): its retry is admitted anew with another coupon
    // id, which Postgres answers as a duplicate of the stored one.
    redis
        .forget_request(t.id, &rid("r0"), first.coupon_id)
        .await?;
    for (user, request) in [("u0", "r0"), ("u1", "r1"), ("u2", "r2"), ("u3", "r3")] {
        assert!(matches!(
            admit(user, request).await?,
            coupon_engine::store::redis::ClaimScript::Granted(_)
        ));
    }
    e.reconcile_with(ReconcileOptions {
        min_pending_age: Duration::ZERO,
    })
    .await?;
    // Room for two more in Postgres: r0 is a duplicate, and one of r1-r3 finds no stock.
    assert_eq!(postgres::template_coupons(e.pool(), t.id).await?.len(), 3);
    assert_eq!(e.acknowledged_claims_refused(), 2);
    Ok(())
}

#[tokio::test]
async fn a_duplicate_past_the_idempotency_window_gives_its_deduction_back() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let t = e.create_template(template(5, 2)).await?;
    let first = e.claim(t.id, &uid("alice"), &rid("r1")).await?;
    // The remembered outcome expires; the unique constraint must catch the retry.
    e.redis()
        .forget_request(t.id, &rid("r1"), first.coupon_id)
        .await?;
    let again = e.claim(t.id, &uid("alice"), &rid("r1")).await?;
    assert_eq!(again.coupon_id, first.coupon_id);
    assert_eq!(e.remaining_stock(t.id).await?, Some(4));
    assert!(e.audit(t.id).await?.ok());
    Ok(())
}

/// Many sales at once: claims over many templates share the group commit's batches (one
/// transaction decides several templates, each under its own counter row, in template
/// order), while two servers do the same on the same templates. Each template's stock
/// stays exact and no batch deadlocks (a deadlock would answer `unavailable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_over_many_templates_share_batches_and_every_stock_stays_exact() -> R {
    const TEMPLATES: usize = 60;
    const STOCK: i64 = 2;
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    let other = env.another_engine(EngineConfig::default()).await?;
    let mut templates = Vec::with_capacity(TEMPLATES);
    for _ in 0..TEMPLATES {
        templates.push(e.create_template(template(STOCK, 1)).await?.id);
    }
    // Every claim of the first server admitted by Redis before any reaches the batcher, so
    // that they queue together: a queue per template gave each a batch of its own.
    let gate = Gate::new();
    e.failpoints()
        .arm(Failpoint::ClaimAfterRedis, FailAction::Block(gate.clone()));
    let before = e.batch_sizes();
    let mut tasks = Vec::new();
    // One claim per template here: whatever batch holds two holds two templates.
    for (n, t) in templates.iter().enumerate() {
        let (e, t) = (e.clone(), *t);
        let who = format!("a{n}");
        tasks.push(tokio::spawn(async move {
            e.claim(t, &uid(who.clone()), &rid(who)).await
        }));
    }
    gate.reached(TEMPLATES as u32).await;
    e.failpoints().disarm(Failpoint::ClaimAfterRedis);
    gate.open();
    for (n, t) in templates.iter().enumerate() {
        for k in 0..STOCK {
            let (o, t) = (other.clone(), *t);
            let who = format!("b{n}-{k}");
            tasks.push(tokio::spawn(async move {
                o.claim(t, &uid(who.clone()), &rid(who)).await
            }));
        }
    }
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    // Three claims per template for a stock of two: two granted, one refused, whoever wins.
    let unexpected: Vec<_> = results
        .iter()
        .filter(|r| matches!(r, Err(err) if !matches!(err, EngineError::StockEmpty)))
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:?}");
    let granted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(granted, TEMPLATES * STOCK as usize);
    for t in &templates {
        let audit = e.audit(*t).await?;
        assert!(audit.ok(), "{audit:?}");
        assert_eq!(audit.counted, STOCK, "{audit:?}");
        assert_eq!(
            postgres::template_coupons(e.pool(), *t).await?.len(),
            STOCK as usize
        );
    }
    let after = e.batch_sizes();
    let (batches, claims) = (after.count - before.count, after.sum - before.sum);
    assert!(
        batches < claims,
        "{claims} claims of the first server in {batches} batches: none shared one"
    );
    Ok(())
}

/// Async mode over many sales at once: the persister decides a batch of many templates in
/// one transaction; every acknowledged claim is stored under its own template's stock.
#[tokio::test]
async fn async_mode_drains_claims_over_many_templates() -> R {
    const TEMPLATES: usize = 40;
    let env = TestEnv::with_config(EngineConfig {
        persistence: Persistence::Async,
        ..EngineConfig::default()
    })
    .await?;
    let e = env.engine.clone();
    let mut templates = Vec::with_capacity(TEMPLATES);
    for _ in 0..TEMPLATES {
        templates.push(e.create_template(template(3, 1)).await?.id);
    }
    // Four shoppers per template of stock three.
    let tasks = (0..TEMPLATES * 4).map(|i| {
        let (e, t) = (e.clone(), templates[i % TEMPLATES]);
        tokio::spawn(async move {
            e.claim(t, &uid(format!("u{i}")), &rid(format!("r{i}")))
                .await
        })
    });
    let acked: Vec<Uuid> = join_all(tasks)
        .await
        .into_iter()
        .filter_map(|r| r.ok()?.ok().map(|c| c.coupon_id))
        .collect();
    assert_eq!(acked.len(), TEMPLATES * 3);
    e.shutdown().await;
    for t in &templates {
        let stored = postgres::template_coupons(e.pool(), *t).await?;
        assert_eq!(stored.len(), 3);
        assert!(stored.iter().all(|c| acked.contains(&c.id)));
        let audit = e.audit(*t).await?;
        assert!(audit.ok() && audit.pending == 0, "{audit:?}");
    }
    Ok(())
}
