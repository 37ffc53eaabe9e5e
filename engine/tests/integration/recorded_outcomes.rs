//! The claims' recorded outcomes live in one hash per template, swept as claims go (no TTL
//! per field before Redis 7.4): an outcome is kept at least the idempotency window, and one
//! older than that goes once the sweep passes it. Driven through the claim script with the
//! clock it is given, so nothing waits for time to pass.

use coupon_engine::{NewTemplate, RefundPolicy, store::redis::ClaimScript};
use coupon_testkit::TestEnv;
use uuid::Uuid;

use crate::{rid, uid};

type R = anyhow::Result<()>;

const WINDOW_SECS: u64 = 60;
const T0: i64 = 1_767_225_600_000;

#[tokio::test]
async fn an_outcome_is_kept_its_window_and_swept_after_it() -> R {
    let env = TestEnv::new().await?;
    let e = &env.engine;
    let t = e
        .create_template(NewTemplate::simple(
            "t",
            10_000,
            1,
            RefundPolicy::ReturnToUser,
        ))
        .await?;
    // Through the engine once, so the claim script is loaded.
    e.claim(t.id, &uid("warm"), &rid("warm")).await?;
    let redis = e.redis();
    let claim = |n: usize, at: i64| async move {
        let name = format!("s{n}");
        redis
            .claim(
                t.id,
                &rid(&name),
                &uid(&name),
                1,
                Uuid::now_v7(),
                at,
                WINDOW_SECS,
            )
            .await
    };
    for n in 0..100 {
        assert!(matches!(claim(n, T0).await?, ClaimScript::Granted(_)));
    }
    // Within the window, sweeps pass over them and keep every one.
    let within = T0 + (WINDOW_SECS as i64 * 1000) - 1;
    for n in 100..200 {
        assert!(matches!(claim(n, within).await?, ClaimScript::Granted(_)));
    }
    assert!(redis.request_record(t.id, &rid("s0")).await?.is_some());
    // Past it, enough grants to sweep the whole hash: the first hundred go, not the others.
    let past = T0 + (WINDOW_SECS as i64 * 1000);
    for n in 200..1_200 {
        assert!(matches!(claim(n, past).await?, ClaimScript::Granted(_)));
    }
    for n in 0..100 {
        assert!(
            redis
                .request_record(t.id, &rid(format!("s{n}")))
                .await?
                .is_none(),
            "s{n}'s outcome outlived its window"
        );
    }
    for n in 100..1_200 {
        assert!(
            redis
                .request_record(t.id, &rid(format!("s{n}")))
                .await?
                .is_some(),
            "s{n}'s outcome went within its window"
        );
    }
    // A retry within the window still finds its outcome: the same coupon, not a second.
    assert!(matches!(claim(1_199, past).await?, ClaimScript::Granted(g) if !g.fresh));
    Ok(())
}
