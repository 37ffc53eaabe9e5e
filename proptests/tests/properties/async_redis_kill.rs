//! The trade-off of async mode (docs/ARCHITECTURE.md, "Claim"), shown by the checker: in
//! `async` mode a Redis crash loses acknowledged claims (I6), in `sync` mode it loses none.
//! The Redis is this test's own `redis-server`, killed with SIGKILL and restarted empty.

use std::{sync::Arc, time::Duration};

use coupon_engine::{
    EngineConfig, NewTemplate, Persistence, RefundPolicy,
    domain::ids::{RequestId, UserId},
};
use coupon_proptests::{
    EventKind, Invariant, Op, OpResult, Recorder, check_acks, op::CouponRef, run::final_state,
};
use coupon_testkit::{Backends, TestEnv, local::LocalRedis, shared_backends};

/// Claims five coupons, kills Redis, claims once more (which rebuilds), drains, and returns
/// the ack checker's violations.
async fn crash_after_acks(
    persistence: Persistence,
) -> anyhow::Result<Vec<coupon_proptests::Finding>> {
    let mut redis = LocalRedis::start()?;
    let shared = shared_backends().await?;
    let backends = Arc::new(Backends::with_urls(
        redis.url(),
        shared.database_url.clone(),
        None,
    ));
    let env = TestEnv::on(
        backends,
        EngineConfig {
            persistence,
            // Intents wait in the persister long enough for the crash to catch them.
            batch_interval: Duration::from_secs(2),
            ..EngineConfig::default()
        },
    )
    .await?;
    let e = env.engine.clone();
    let t = e
        .create_template(NewTemplate::simple("t", 10, 1, RefundPolicy::ReturnToUser))
        .await?;
    let recorder = Recorder::new();
    let claim = |i: usize| {
        let (e, recorder) = (e.clone(), recorder.clone());
        async move {
            let (user, rid) = (format!("u{i}"), format!("r{i}"));
            let op = Op::Claim {
                template: 0,
                user: user.clone(),
                request_id: rid.clone(),
            };
            let id = recorder.invoke(i as u32, op);
            let user = UserId::parse(user).expect("a valid user id");
            let request = RequestId::parse(rid.as_str()).expect("a valid request id");
            match e.claim(t.id, &user, &request).await {
                Ok(_) => recorder.complete(
                    id,
                    EventKind::Ok,
                    Some(OpResult::Claimed {
                        coupon: CouponRef {
                            template: 0,
                            request_id: rid,
                        },
                    }),
                ),
                Err(_) => recorder.complete(id, EventKind::Unknown, None),
            }
        }
    };
    for i in 0..5 {
        claim(i).await;
    }
    let _redis = tokio::task::spawn_blocking(move || redis.restart().map(|()| redis)).await??;
    // The connection manager reconnects on first use after the crash.
    for _ in 0..100 {
        if e.health().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    claim(5).await;
    e.flush().await?;
    e.reconcile_with(coupon_engine::ReconcileOptions {
        min_pending_age: Duration::ZERO,
    })
    .await?;
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "the stores agree either way: {audit:?}");
    let fin = final_state(&e, &[t.id]).await?;
    e.shutdown().await;
    Ok(check_acks(&recorder.snapshot(), &fin)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_mode_loses_acknowledged_claims_when_redis_crashes() -> anyhow::Result<()> {
    let violations = crash_after_acks(Persistence::Async).await?;
    eprintln!("{violations:#?}");
    assert_eq!(violations.len(), 5, "{violations:#?}");
    assert!(violations.iter().all(|v| v.invariant == Invariant::I6));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_mode_loses_nothing_when_redis_crashes() -> anyhow::Result<()> {
    let violations = crash_after_acks(Persistence::Sync).await?;
    assert!(violations.is_empty(), "{violations:#?}");
    Ok(())
}
