//! Redeem, refund and expiry against real Redis and Postgres.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use coupon_engine::{
    CouponEngine, CouponStatus, Discount, DiscountKind, EngineError, NewTemplate, RefundPolicy,
};
use coupon_testkit::TestEnv;
use futures::future::join_all;
use uuid::Uuid;

use coupon_engine::domain::ids::TemplateId;

use crate::{rid, uid};

type R = anyhow::Result<()>;

async fn claimed(
    e: &CouponEngine,
    policy: RefundPolicy,
    user: &str,
) -> anyhow::Result<(TemplateId, Uuid)> {
    let t = e
        .create_template(NewTemplate::simple("t", 10, 2, policy))
        .await?;
    let c = e.claim(t.id, &uid(user), &rid("r1")).await?;
    Ok((t.id, c.coupon_id))
}

async fn live_rows(e: &CouponEngine, coupon: Uuid) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM coupon_use_log WHERE coupon_id = $1 AND NOT undone",
    )
    .bind(coupon)
    .fetch_one(e.pool())
    .await?)
}

#[tokio::test]
async fn redeem_is_idempotent_per_order_and_refuses_precisely() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let (t, c) = claimed(e, RefundPolicy::ReturnToUser, "alice").await?;
    let r = e.redeem(c, &uid("alice"), "o1", 2000).await?;
    assert_eq!((r.discount, r.replay), (500, false));
    let again = e.redeem(c, &uid("alice"), "o1", 2000).await?;
    assert_eq!((again.discount, again.replay), (500, true));
    assert!(matches!(
        e.redeem(c, &uid("alice"), "o2", 2000).await,
        Err(EngineError::AlreadyUsed)
    ));
    assert!(matches!(
        e.redeem(c, &uid("bob"), "o3", 2000).await,
        Err(EngineError::NotOwner)
    ));
    assert!(matches!(
        e.redeem(Uuid::new_v4(), &uid("alice"), "o3", 1).await,
        Err(EngineError::NotFound(_))
    ));
    assert_eq!(
        e.redeem(c, &uid("alice"), "o3", -1)
            .await
            .unwrap_err()
            .code(),
        "invalid_request"
    );
    assert_eq!(
        e.redeem(c, &uid("alice"), "", 1).await.unwrap_err().code(),
        "invalid_request"
    );
    assert_eq!(live_rows(e, c).await?, 1);
    assert!(e.audit(t).await?.ok());
    Ok(())
}

#[tokio::test]
async fn discounts_follow_the_template_and_small_orders_are_refused() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let mut spec = NewTemplate::simple("pct", 10, 5, RefundPolicy::ReturnToUser);
    spec.discount = Discount {
        kind: DiscountKind::Percent,
        amount: None,
        percent: Some(20),
        min_order_amount: Some(1000),
        max_discount: Some(300),
    };
    let t = e.create_template(spec).await?;
    let a = e.claim(t.id, &uid("u"), &rid("a")).await?.coupon_id;
    let b = e.claim(t.id, &uid("u"), &rid("b")).await?.coupon_id;
    let err = e.redeem(a, &uid("u"), "small", 999).await.unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::BelowMinAmount {
                amount: 999,
                min: 1000
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "below_min_amount");
    assert_eq!(
        e.coupon(a).await?.map(|c| c.status),
        Some(CouponStatus::Issued)
    );
    assert_eq!(e.redeem(a, &uid("u"), "o1", 1000).await?.discount, 200);
    assert_eq!(e.redeem(b, &uid("u"), "o2", 5000).await?.discount, 300);
    assert!(e.audit(t.id).await?.ok());
    Ok(())
}

#[tokio::test]
async fn fifty_concurrent_redeems_with_different_orders_succeed_once() -> R {
    for lock in [true, false] {
        let env = TestEnv::with_config(coupon_engine::EngineConfig {
            redeem_lock: lock,
            ..Default::default()
        })
        .await?;
        let e = env.engine.clone();
        let (t, c) = claimed(&e, RefundPolicy::ReturnToUser, "alice").await?;
        let barrier = Arc::new(tokio::sync::Barrier::new(50));
        let tasks = (0..50).map(|i| {
            let (e, b) = (e.clone(), barrier.clone());
            tokio::spawn(async move {
                b.wait().await;
                e.redeem(c, &uid("alice"), &format!("order{i}"), 5000).await
            })
        });
        let results: Vec<_> = join_all(tasks)
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "lock={lock}: {results:?}");
        assert!(
            results.iter().all(
                |r| r.is_ok() || matches!(r, Err(EngineError::AlreadyUsed | EngineError::Busy))
            ),
            "{results:?}"
        );
        assert_eq!(live_rows(&e, c).await?, 1);
        assert!(e.audit(t).await?.ok());
        // No lock leaks: a later redeem of the same order answers at once.
        assert!(e.redeem(c, &uid("alice"), "order-late", 1).await.is_err());
    }
    Ok(())
}

#[tokio::test]
async fn refund_to_user_reissues_the_coupon_and_never_returns_stock() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let (t, c) = claimed(e, RefundPolicy::ReturnToUser, "alice").await?;
    e.redeem(c, &uid("alice"), "o1", 1000).await?;
    assert_eq!(
        e.refund(c, &uid("alice"), "o2").await.unwrap_err().code(),
        "invalid_state"
    );
    assert!(matches!(
        e.refund(c, &uid("bob"), "o1").await,
        Err(EngineError::NotOwner)
    ));
    let r = e.refund(c, &uid("alice"), "o1").await?;
    assert_eq!((r.status, r.replay), (CouponStatus::Issued, false));
    let again = e.refund(c, &uid("alice"), "o1").await?;
    assert_eq!((again.status, again.replay), (CouponStatus::Issued, true));
    assert_eq!(e.remaining_stock(t).await?, Some(9));
    assert_eq!(live_rows(e, c).await?, 0);
    // The refunded coupon is usable again, by a new order.
    e.redeem(c, &uid("alice"), "o2", 1000).await?;
    assert_eq!(
        e.redeem(c, &uid("alice"), "o1", 1000)
            .await
            .unwrap_err()
            .code(),
        "already_used"
    );
    let audit = e.audit(t).await?;
    assert!(audit.ok(), "{audit:?}");
    Ok(())
}

#[tokio::test]
async fn refund_extends_validity_when_the_template_says_so() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let mut spec = NewTemplate::simple("ext", 5, 1, RefundPolicy::ReturnToUser);
    spec.extend_validity_on_refund = true;
    let t = e.create_template(spec).await?;
    let c = e.claim(t.id, &uid("u"), &rid("r")).await?.coupon_id;
    let before = e.coupon(c).await?.map(|c| c.valid_until);
    e.redeem(c, &uid("u"), "o", 1000).await?;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    e.refund(c, &uid("u"), "o").await?;
    let after = e.coupon(c).await?.map(|c| c.valid_until);
    assert!(after > before, "{before:?} -> {after:?}");
    Ok(())
}

#[tokio::test]
async fn refund_to_stock_revokes_and_returns_stock_exactly_once() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let (t, c) = claimed(e, RefundPolicy::ReturnToStock, "alice").await?;
    e.redeem(c, &uid("alice"), "o1", 1000).await?;
    let r = e.refund(c, &uid("alice"), "o1").await?;
    assert_eq!(r.status, CouponStatus::Revoked);
    assert_eq!(e.remaining_stock(t).await?, Some(10));
    assert!(e.refund(c, &uid("alice"), "o1").await?.replay);
    e.relay_outbox(t).await?;
    assert_eq!(e.remaining_stock(t).await?, Some(10));
    assert_eq!(
        e.redeem(c, &uid("alice"), "o3", 1000)
            .await
            .unwrap_err()
            .code(),
        "invalid_state"
    );
    // The quota came back too.
    e.claim(t, &uid("alice"), &rid("r2")).await?;
    e.claim(t, &uid("alice"), &rid("r3")).await?;
    let audit = e.audit(t).await?;
    assert!(audit.ok(), "{audit:?}");
    Ok(())
}

#[tokio::test]
async fn refund_of_an_unused_coupon_is_refused_and_changes_nothing() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let (t, c) = claimed(e, RefundPolicy::ReturnToStock, "alice").await?;
    assert_eq!(
        e.refund(c, &uid("alice"), "o1").await.unwrap_err().code(),
        "invalid_state"
    );
    assert_eq!(
        e.refund(Uuid::new_v4(), &uid("alice"), "o1")
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    assert_eq!(
        e.coupon(c).await?.map(|c| c.status),
        Some(CouponStatus::Issued)
    );
    assert_eq!(e.remaining_stock(t).await?, Some(9));
    assert!(e.audit(t).await?.ok());
    Ok(())
}

#[tokio::test]
async fn concurrent_refund_and_redeem_leave_a_consistent_coupon() -> R {
    let env = TestEnv::new().await?;
    let e = env.engine.clone();
    for policy in [RefundPolicy::ReturnToUser, RefundPolicy::ReturnToStock] {
        let (t, c) = claimed(&e, policy, "alice").await?;
        e.redeem(c, &uid("alice"), "o1", 1000).await?;
        let barrier = Arc::new(tokio::sync::Barrier::new(20));
        let tasks = (0..20).map(|i| {
            let (e, b) = (e.clone(), barrier.clone());
            tokio::spawn(async move {
                b.wait().await;
                if i % 2 == 0 {
                    e.refund(c, &uid("alice"), "o1").await.map(|_| ())
                } else {
                    e.redeem(c, &uid("alice"), &format!("n{i}"), 1000)
                        .await
                        .map(|_| ())
                }
            })
        });
        join_all(tasks).await;
        e.relay_outbox(t).await?;
        let audit = e.audit(t).await?;
        assert!(audit.ok(), "{policy:?}: {audit:?}");
        assert!(live_rows(&e, c).await? <= 1);
    }
    Ok(())
}

#[tokio::test]
async fn expired_coupons_are_swept_and_cannot_be_redeemed() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let (t, c) = claimed(e, RefundPolicy::ReturnToUser, "alice").await?;
    sqlx::query("UPDATE user_coupon SET valid_until = now() - interval '1 second' WHERE id = $1")
        .bind(c)
        .execute(e.pool())
        .await?;
    assert!(matches!(
        e.redeem(c, &uid("alice"), "o1", 1000).await,
        Err(EngineError::Expired)
    ));
    assert_eq!(e.expire_sweep().await?, 1);
    assert_eq!(
        e.coupon(c).await?.map(|c| c.status),
        Some(CouponStatus::Expired)
    );
    assert!(matches!(
        e.redeem(c, &uid("alice"), "o1", 1000).await,
        Err(EngineError::Expired)
    ));
    assert_eq!(e.expire_sweep().await?, 0);
    // Expired coupons still count against stock and the limit.
    let audit = e.audit(t).await?;
    assert!(audit.ok() && audit.counted == 1, "{audit:?}");
    Ok(())
}
