//! Claims while the hot template's cluster slot migrates to another master. Before, every
//! fresh claim named a key of its own (its recorded outcome), missing until it ran, and a
//! node answers a script naming a missing key `TRYAGAIN` while its slot migrates: 418 of
//! 440 claims answered 503 during a 21-second reshard. Now every key a claim names exists.

use std::time::Instant;

use coupon_engine::{Variant, domain::ids::TemplateId};
use coupon_testkit::redis_cluster::SlotMigration;

use crate::redis_cluster::{OnCluster, R};

/// Other keys of the template's slot (a slot holds many templates' keys), so the
/// migration takes many `MIGRATE` calls.
const OTHER_KEYS: usize = 2_000;
/// Keys per `MIGRATE`, as `redis-cli --cluster reshard` moves them (its default pipeline).
const PER_CALL: usize = 10;

/// A sale on a cluster of its own whose slot is migrating, held half-way: other keys of
/// the slot moved, the template's own still on the source. Returns the cluster, the
/// template and the migration.
async fn held_half_way(
    variant: Variant,
) -> anyhow::Result<(OnCluster, TemplateId, SlotMigration, Instant)> {
    let on = OnCluster::start(variant).await?;
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
    let half = others[..OTHER_KEYS / 2].to_vec();
    let m = migration.clone();
    tokio::task::spawn_blocking(move || {
        half.chunks(PER_CALL).try_for_each(|keys| m.move_keys(keys))
    })
    .await??;
    Ok((on, t, migration, began))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_served_while_the_templates_slot_migrates() -> R {
    let (on, t, migration, began) = held_half_way(Variant::Correct).await?;
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

/// D18 names a key of each request's own in its claim, as round two did: missing until the
/// claim runs, so the node answers TRYAGAIN as long as the slot migrates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_naming_a_missing_key_is_not_served_while_the_slot_migrates() -> R {
    let (on, t, migration, began) = held_half_way(Variant::D18).await?;
    assert_eq!(
        on.claims(t, "migrating-", 5).await?,
        0,
        "D18's fresh claims cannot be served while the slot migrates"
    );
    let m = migration.clone();
    tokio::task::spawn_blocking(move || m.finish(PER_CALL, began)).await??;
    assert_eq!(
        on.claims(t, "after-", 5).await?,
        5,
        "served again once it moved"
    );
    on.audit_ok(t).await?;
    drop(on);
    Ok(())
}
