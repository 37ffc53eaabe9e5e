//! The testcontainers way of provisioning (way 2, docs/ARCHITECTURE.md, "Provisioning"),
//! forced: ignores the URL variables, starts Redis and Postgres containers through the
//! provisioning API, runs claim → redeem → refund and the audit on them, and stops them.
//!
//! Without a Docker daemon this fails with the provisioning error, unless
//! `COUPON_SKIP_CONTAINER_TESTS=1` says to skip, and then it prints why: a green run never
//! hides that the container path was not exercised.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use coupon_engine::{CouponStatus, EngineConfig, NewTemplate, RefundPolicy};
use coupon_testkit::{Backends, TestEnv, Way};

use crate::{rid, uid};

#[tokio::test]
async fn the_container_way_runs_the_full_flow() -> anyhow::Result<()> {
    if std::env::var("COUPON_SKIP_CONTAINER_TESTS").as_deref() == Ok("1") {
        eprintln!(
            "SKIPPED the_container_way_runs_the_full_flow: COUPON_SKIP_CONTAINER_TESTS=1, \
             so the testcontainers path was NOT exercised"
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    let backends = Backends::containers().await?;
    assert_eq!(backends.way, Way::Containers);
    assert!(backends.redis_url().starts_with("redis://127.0.0.1:"));
    eprintln!("containers up in {:?}", started.elapsed());
    let env = TestEnv::on(Arc::new(backends), EngineConfig::default()).await?;
    let e = &env.engine;
    let t = e
        .create_template(NewTemplate::simple("c", 3, 1, RefundPolicy::ReturnToStock))
        .await?;
    let c = e.claim(t.id, &uid("alice"), &rid("r1")).await?;
    e.redeem(c.coupon_id, &uid("alice"), "o1", 1000).await?;
    let r = e.refund(c.coupon_id, &uid("alice"), "o1").await?;
    assert_eq!(r.status, CouponStatus::Revoked);
    assert_eq!(e.remaining_stock(t.id).await?, Some(3));
    let audit = e.audit(t.id).await?;
    assert!(audit.ok(), "{audit:?}");
    drop(env);
    eprintln!("container flow done in {:?}", started.elapsed());
    Ok(())
}
