//! The start-up warning about Postgres settings that let a crash take back acknowledged sync
//! claims: none on a server as configured by default, one naming `synchronous_commit` when
//! the engine's sessions commit without waiting for the flush.

use std::sync::Arc;

use coupon_engine::EngineConfig;
use coupon_testkit::{Backends, TestEnv, shared_backends};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_commit_off_is_named_and_the_default_is_not() -> anyhow::Result<()> {
    let shared = shared_backends().await?;
    let default = TestEnv::on(shared.clone(), EngineConfig::default()).await?;
    assert_eq!(
        default.engine.postgres_durability_risks().await,
        Vec::<String>::new()
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
    assert_eq!(risks.len(), 1, "{risks:?}");
    assert!(risks[0].contains("synchronous_commit is off"), "{risks:?}");
    Ok(())
}
