//! The sold-out gate (docs/ARCHITECTURE.md, "The sold-out gate"): a sold-out template's
//! refusals are answered without Redis, retries of granted claims still get their coupons,
//! and stock that comes back is admitted again: at once on the server that gave it back,
//! within the gate's bound on every other. Each test runs on a Redis of its own, so its
//! script calls can be counted.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use coupon_engine::{
    CouponEngine, EngineConfig, EngineError, NewTemplate, RefundPolicy, domain::ids::TemplateId,
};
use coupon_testkit::{TestEnv, local::LocalRedis};

use crate::{rid, uid};

type R = anyhow::Result<()>;

/// Claim scripts Redis has run since it started.
async fn scripts_run(redis: &LocalRedis) -> anyhow::Result<u64> {
    let client = redis::Client::open(redis.url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await?;
    Ok(stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

async fn refused(e: &CouponEngine, t: TemplateId, who: &str) -> bool {
    matches!(
        e.claim(t, &uid(who), &rid(who)).await,
        Err(EngineError::StockEmpty)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_sale_refuses_without_redis_and_its_retries_get_their_coupons() -> R {
    let redis = LocalRedis::start()?;
    let env = TestEnv::on_redis(redis.url(), EngineConfig::default()).await?;
    let e = env.engine.clone();
    let t = e
        .create_template(NewTemplate::simple(
            "gate",
            3,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;
    let mut granted = Vec::new();
    for who in ["g0", "g1", "g2"] {
        granted.push(e.claim(t.id, &uid(who), &rid(who)).await?);
    }
    // Redis refuses the first one past the stock; the gate closes on it.
    assert!(refused(&e, t.id, "late").await);
    let before = scripts_run(&redis).await?;
    for n in 0..100 {
        assert!(refused(&e, t.id, &format!("flood{n}")).await);
    }
    assert_eq!(
        scripts_run(&redis).await? - before,
        0,
        "a sold-out sale's refusals reached Redis"
    );
    assert!(e.sold_out_local_refusals() >= 100);
    // A shopper whose answer was lost retries and gets the coupon it holds.
    for (who, first) in ["g0", "g1", "g2"].iter().zip(&granted) {
        let again = e.claim(t.id, &uid(*who), &rid(*who)).await?;
        assert_eq!(again.coupon_id, first.coupon_id);
        assert!(again.replay);
    }
    // A refund to stock by this server reopens its gate at once.
    e.redeem(granted[0].coupon_id, &uid("g0"), "o1", 1000)
        .await?;
    e.refund(granted[0].coupon_id, &uid("g0"), "o1").await?;
    let back = e.claim(t.id, &uid("back"), &rid("back")).await?;
    assert_eq!(back.remaining_stock, 0);
    assert!(refused(&e, t.id, "after").await);
    // With the gate off, every refusal is Redis's.
    let off = env
        .another_engine(EngineConfig {
            sold_out_recheck: Duration::ZERO,
            ..EngineConfig::default()
        })
        .await?;
    let before = scripts_run(&redis).await?;
    for n in 0..10 {
        assert!(refused(&off, t.id, &format!("off{n}")).await);
    }
    // (Its first claim may meet NOSCRIPT and run the script twice.)
    assert!(scripts_run(&redis).await? - before >= 10);
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{audit:?}");
    drop(env);
    Ok(())
}

/// Stock given back through one server is admitted by another within the gate's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_given_back_elsewhere_is_admitted_within_the_bound() -> R {
    let redis = LocalRedis::start()?;
    let bound = Duration::from_millis(300);
    let config = EngineConfig {
        sold_out_recheck: bound,
        ..EngineConfig::default()
    };
    let env = TestEnv::on_redis(redis.url(), config.clone()).await?;
    let a = env.engine.clone();
    let b = env.another_engine(config).await?;
    let t = a
        .create_template(NewTemplate::simple(
            "gate",
            1,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;
    let only = a.claim(t.id, &uid("first"), &rid("first")).await?;
    assert!(refused(&b, t.id, "closes").await);
    let local = b.sold_out_local_refusals();
    assert!(refused(&b, t.id, "shut").await);
    assert_eq!(b.sold_out_local_refusals(), local + 1, "b's gate is closed");
    a.redeem(only.coupon_id, &uid("first"), "o1", 1000).await?;
    a.refund(only.coupon_id, &uid("first"), "o1").await?;
    let back = Instant::now();
    let mut n = 0;
    let granted = loop {
        n += 1;
        let who = format!("again{n}");
        match b.claim(t.id, &uid(&who), &rid(&who)).await {
            Ok(c) => break c,
            Err(EngineError::StockEmpty) if back.elapsed() < bound * 10 => {
                tokio::task::yield_now().await;
            }
            other => panic!("not admitted within ten times the bound: {other:?}"),
        }
    };
    let waited = back.elapsed();
    // The bound, plus a Postgres read and a claim on two busy cores.
    assert!(
        waited < bound + Duration::from_secs(1),
        "the place given back waited {waited:?} on the other server"
    );
    assert_eq!(granted.remaining_stock, 0);
    let audit = a.audit(t.id).await?;
    assert!(audit.ok(), "{audit:?}");
    drop(env);
    Ok(())
}
