//! A Postgres failover to a standby that lacked the last commits (docs/ARCHITECTURE.md,
//! "Store identities"): the engine must notice the new Postgres, rebuild Redis from it so
//! the lost coupons' stock sells again, count a retried claim it had acknowledged and lost,
//! and rebuild each template once however many engines notice. Each test runs on a primary
//! and a streaming standby of its own (`pg_basebackup` on loopback), reached through a
//! proxy standing for a VIP.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{sync::Arc, time::Duration};

use coupon_engine::{
    CouponEngine, EngineConfig, EngineError, Invariant, NewTemplate, RefundPolicy, Template,
    Variant, store::postgres,
};
use coupon_testkit::{
    Backends, TestEnv, engine_on,
    pg_failover::{ReplicatedPostgres, Replication},
    shared_backends,
};

use crate::{rid, uid};

type R = anyhow::Result<()>;

/// An environment on the pair (through its VIP) and the shared Redis; the identity watch
/// off, so the test decides when the change can be noticed. Fields drop in order: the
/// environment removes its database while Postgres still runs.
struct OnPair {
    env: TestEnv,
    pair: ReplicatedPostgres,
}

async fn on_pair(mode: Replication, variant: Variant) -> anyhow::Result<OnPair> {
    let pair = tokio::task::spawn_blocking(move || ReplicatedPostgres::start(mode)).await??;
    let shared = shared_backends().await?;
    let backends = Arc::new(Backends::with_target(
        shared.redis.clone(),
        pair.url(),
        None,
    ));
    let env = TestEnv::on(backends, config(variant)).await?;
    Ok(OnPair { env, pair })
}

fn config(variant: Variant) -> EngineConfig {
    EngineConfig {
        variant,
        identity_check_interval: Duration::ZERO,
        ..EngineConfig::default()
    }
}

async fn sale_of_100(e: &CouponEngine) -> anyhow::Result<Template> {
    let t = e
        .create_template(NewTemplate::simple(
            "sale",
            100,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;
    e.check_redis_identity().await?;
    Ok(t)
}

/// Claims `n` coupons for users `prefix0`…, each acknowledged.
async fn claim_n(e: &CouponEngine, t: &Template, prefix: &str, n: usize) -> R {
    for i in 0..n {
        e.claim(
            t.id,
            &uid(format!("{prefix}{i}")),
            &rid(format!("{prefix}{i}")),
        )
        .await?;
    }
    Ok(())
}

/// 30 claims replicated, then 20 acknowledged by the primary alone (the replication link
/// held), then the failover: returns the sale.
async fn sell_across_a_failover(on: &OnPair) -> anyhow::Result<Template> {
    let e = &on.env.engine;
    let t = sale_of_100(e).await?;
    claim_n(e, &t, "a", 30).await?;
    let pair = &on.pair;
    tokio::task::block_in_place(|| pair.wait_until_replayed())?;
    pair.hold_replication();
    claim_n(e, &t, "b", 20).await?;
    tokio::task::block_in_place(|| pair.fail_over())?;
    forget_dead_connections(e).await;
    Ok(t)
}

/// Lets every pooled connection to the dead primary fail once (each fails the one statement
/// that meets it, and the pool drops it), so the test's next statements reach the new one.
async fn forget_dead_connections(e: &CouponEngine) {
    for _ in 0..=e.pool().size() {
        let _ = postgres::ping(e.pool()).await;
    }
}

async fn rows(e: &CouponEngine, t: &Template) -> anyhow::Result<i64> {
    let mut conn = e.pool().acquire().await?;
    Ok(postgres::counted_per_user(&mut conn, t.id)
        .await?
        .iter()
        .map(|(_, n)| n)
        .sum())
}

/// A claim that meets the pool's connections to the dead primary fails once, as a client
/// would see it (outcome unknown); it is retried with the same ids.
async fn claim_through(e: &CouponEngine, t: &Template, who: &str) -> Result<(), EngineError> {
    for _ in 0..5 {
        match e.claim(t.id, &uid(who), &rid(who)).await {
            Err(err) if err.outcome_unknown() => continue,
            other => return other.map(|_| ()),
        }
    }
    e.claim(t.id, &uid(who), &rid(who)).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asynchronous_failover_is_noticed_and_redis_is_rebuilt_from_the_new_primary() -> R {
    let on = on_pair(Replication::Asynchronous, Variant::Correct).await?;
    let t = sell_across_a_failover(&on).await?;
    let e = &on.env.engine;
    assert_eq!(
        rows(e, &t).await?,
        30,
        "the new primary lacks the 20 claims the old one acknowledged alone"
    );
    // A client retries one of the lost claims before the change is noticed: Redis holds it
    // as granted, Postgres has no row. Counted, and (limit 1, Redis still counting the lost
    // coupon) refused until Redis is rebuilt.
    let lost = claim_through(e, &t, "b0").await;
    assert!(
        matches!(lost, Err(EngineError::UserLimit { .. })),
        "{lost:?}"
    );
    assert_eq!(e.settled_claims_missing(), 1);

    assert!(
        e.check_redis_identity().await?,
        "the new timeline is a change"
    );
    assert_eq!(
        e.remaining_stock(t.id).await?,
        Some(70),
        "Redis agrees with the new primary: the lost coupons' stock sells again"
    );
    claim_through(e, &t, "b0").await?;
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{:?}", audit.violations);

    // A second engine noticing the same change finds it rebuilt: one rebuild per change.
    let second_config = EngineConfig {
        namespace: on.env.namespace.clone(),
        ..config(Variant::Correct)
    };
    let second = engine_on(&on.env.database_url, &on.env.redis, second_config).await?;
    assert!(!second.check_redis_identity().await?);
    assert!(!e.check_redis_identity().await?);
    let audit = e.audit(t.id).await?;
    assert!(!audit.violated().contains(&Invariant::I14), "{audit:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_failover_loses_nothing_acknowledged() -> R {
    let on = on_pair(Replication::Synchronous, Variant::Correct).await?;
    let e = on.env.engine.clone();
    let t = sale_of_100(&e).await?;
    claim_n(&e, &t, "a", 30).await?;
    on.pair.hold_replication();
    // With the standby unreachable a commit waits for it: the claim is not acknowledged,
    // its deadline ends it, outcome unknown.
    let held = e.claim(t.id, &uid("held"), &rid("held")).await;
    assert!(
        held.as_ref().is_err_and(EngineError::outcome_unknown),
        "{held:?}"
    );
    tokio::task::block_in_place(|| on.pair.fail_over())?;
    forget_dead_connections(&e).await;
    e.check_redis_identity().await?;
    assert_eq!(rows(&e, &t).await?, 30, "every acknowledged claim survived");
    claim_through(&e, &t, "held").await?;
    assert_eq!(rows(&e, &t).await?, 31);
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{:?}", audit.violations);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_trusts_redis_across_a_failover_and_the_lost_stock_never_sells() -> R {
    let on = on_pair(Replication::Asynchronous, Variant::D14).await?;
    let t = sell_across_a_failover(&on).await?;
    let e = &on.env.engine;
    assert!(!e.check_redis_identity().await?, "D14 sees no change");
    assert_eq!(e.remaining_stock(t.id).await?, Some(50));
    let audit = e.audit(t.id).await?;
    assert!(audit.violated().contains(&Invariant::I2), "{audit:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_rebuilds_on_every_check_and_the_auditor_says_so() -> R {
    let env = TestEnv::with_config(config(Variant::D15)).await?;
    let e = &env.engine;
    let t = sale_of_100(e).await?;
    e.check_redis_identity().await?;
    e.check_redis_identity().await?;
    let audit = e.audit(t.id).await?;
    assert!(audit.violated().contains(&Invariant::I14), "{audit:?}");
    Ok(())
}
