//! The start-up warnings about store settings that weaken what the engine promises: Postgres
//! settings that let a crash take back acknowledged sync claims (none on a server as
//! configured by default, one naming `synchronous_commit` when the engine's sessions commit
//! without waiting for the flush), and Redis eviction policies (every one but `noeviction`).

use std::sync::Arc;

use coupon_engine::EngineConfig;
use coupon_testkit::{Backends, TestEnv, local::LocalRedis, shared_backends};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_commit_off_is_named_and_the_default_is_not() -> anyhow::Result<()> {
    let shared = shared_backends().await?;
    let default = TestEnv::on(shared.clone(), EngineConfig::default()).await?;
    // The fixture may itself be risky (the local-binaries Postgres runs fsync=off for speed):
    // the default session setting adds no risk of its own, and the one changed adds one.
    let baseline = default.engine.postgres_durability_risks().await;
    assert!(
        !baseline.iter().any(|r| r.contains("synchronous_commit")),
        "{baseline:?}"
    );

    // The setting as a session default of every connection the engine opens.
    let sep = if shared.database_url.contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{sep}options=-c%20synchronous_commit%3Doff",
        shared.database_url
    );
    let backends = Arc::new(Backends::with_target(shared.redis.clone(), url, None));
    let off = TestEnv::on(backends, EngineConfig::default()).await?;
    let risks = off.engine.postgres_durability_risks().await;
    let added: Vec<_> = risks.iter().filter(|r| !baseline.contains(r)).collect();
    assert_eq!(added.len(), 1, "{risks:?} beside {baseline:?}");
    assert!(added[0].contains("synchronous_commit is off"), "{risks:?}");
    Ok(())
}

/// Each policy is set on a `redis-server` of the test's own, never the shared one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_eviction_policy_but_noeviction_is_named() -> anyhow::Result<()> {
    let redis = LocalRedis::start()?;
    let env = TestEnv::on_redis(redis.url(), EngineConfig::default()).await?;
    let mut conn = env.engine.redis().connection();
    for (policy, named) in [
        ("noeviction", None),
        ("volatile-lru", Some("idempotency records")),
        ("volatile-ttl", Some("idempotency records")),
        ("allkeys-lru", Some("counters")),
        ("allkeys-random", Some("counters")),
    ] {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg(policy)
            .query_async::<()>(&mut conn)
            .await?;
        let risk = env.engine.redis_eviction_risk().await;
        match named {
            None => assert_eq!(risk, None, "{policy}"),
            Some(what) => {
                let risk = risk.unwrap_or_else(|| panic!("{policy} was not named"));
                assert!(
                    risk.contains(policy) && risk.contains(what),
                    "{policy}: {risk}"
                );
                assert!(risk.contains("Use noeviction"), "{policy}: {risk}");
            }
        }
    }
    drop(env);
    Ok(())
}
