//! Claims while the hot template's cluster slot migrates to another master. Before, every
//! fresh claim named a key of its own (its recorded outcome), missing until it ran, and a
//! node answers a script naming a missing key `TRYAGAIN` while its slot migrates: 418 of
//! 440 claims answered 503 during a 21-second reshard. Now every key a claim names exists.

use std::time::Instant;

use coupon_engine::Variant;

use crate::redis_cluster::{OnCluster, R};

/// Other keys of the template's slot (a slot holds many templates' keys), so the
/// migration takes many `MIGRATE` calls.
const OTHER_KEYS: usize = 2_000;
/// Keys per `MIGRATE`, as `redis-cli --cluster reshard` moves them (its default pipeline).
const PER_CALL: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_served_while_the_templates_slot_migrates() -> R {
    let on = OnCluster::start(Variant::Correct).await?;
    let t = on.sale(500).await?;
    on.first_claim(t).await?;
    let others: Vec<String> = (0..OTHER_KEYS)
        .map(|i| format!("another-sale:{{{t}}}:{i}"))
        .collect();
    let mut pipe = redis::pipe();
    for k in &others {
        pipe.set(k, 1).ignore();
    }
    pipe.query_async::<()>(&mut on.env.engine.redis().connection())
        .await?;
    let stock_key = on.env.engine.redis().keys(t).stock;
    let (source, _) = on.owners(t).await?;
    let began = Instant::now();
    let migration = on
        .on_cluster(move |c| c.begin_slot_migration(&stock_key))
        .await?;
    assert_eq!(migration.source, source);

    // Held half-way, the template's keys still on the source: fresh claims are served.
    let half = others[..OTHER_KEYS / 2].to_vec();
    let m = migration.clone();
    tokio::task::spawn_blocking(move || {
        half.chunks(PER_CALL).try_for_each(|keys| m.move_keys(keys))
    })
    .await??;
    assert_eq!(
        on.claims(t, "migrating-", 20).await?,
        20,
        "every fresh claim is granted while the slot migrates"
    );

    // The rest moves while claims go on; the template's keys are split between the nodes
    // for a moment, which the cluster client rides out (TRYAGAIN retried with backoff).
    let m = migration.clone();
    let mover = tokio::task::spawn_blocking(move || m.finish(PER_CALL, began));
    let during = on.claims(t, "moving-", 100).await?;
    let migrated = mover.await??;
    assert!(
        migrated.keys >= (OTHER_KEYS / 2) as u64,
        "moved {} keys",
        migrated.keys
    );
    assert!(
        during >= 90,
        "{during} of 100 claims granted while the rest moved"
    );
    assert_eq!(on.owners(t).await?.0, migration.target);

    // On the new master the sale goes on and sells exactly its stock.
    on.claims(t, "after-", 500).await?;
    assert_eq!(on.issued(t).await?, 500);
    on.audit_ok(t).await?;
    drop(on);
    Ok(())
}
