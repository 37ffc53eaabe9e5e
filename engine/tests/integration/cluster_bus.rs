//! A partial partition of the cluster bus: every peer's link to the master owning the sale's
//! slot held (bytes kept, nothing reset) past the node timeout, while that master still
//! reaches its peers over its own links and serves clients. Redis counts any packet from a
//! node, on either link, as a sign of life, so its peers do not fail it over; the engine must
//! not react either: no change of identity, no rebuild (I14, in the audit), every claim
//! served, the stock exact. Round two read the cluster's identity from one node's gossip,
//! whose opinions such a partition can split; each master now answers for itself.

use std::time::Duration;

use coupon_engine::Variant;

use crate::redis_cluster::{OnCluster, R};

/// Past the test cluster's node timeout (1 s) several times over.
const HELD: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_masters_bus_held_from_its_peers_changes_nothing_the_engine_sees() -> R {
    let on = OnCluster::start_with_bus_proxies(Variant::Correct).await?;
    let t = on.sale(100_000).await?;
    on.env.engine.check_redis_identity().await?;
    assert_eq!(on.claims(t, "before-", 30).await?, 30);
    let key = on.env.engine.redis().keys(t).stock;
    let held = on.on_cluster(move |c| c.hold_bus_of(&key)).await?;
    let started = tokio::time::Instant::now();
    let mut round = 0;
    let mut granted = 0;
    while started.elapsed() < HELD {
        assert!(
            !on.env.engine.check_redis_identity().await?,
            "the stores did not change: no rebuild"
        );
        granted += on.claims(t, &format!("held{round}-"), 2).await?;
        round += 1;
    }
    assert_eq!(
        granted,
        2 * round,
        "every claim served while the bus was held"
    );
    assert_eq!(on.owners(t).await?.0, held, "no failover");
    on.on_cluster(|c| {
        c.release_buses();
        c.wait_healthy()
    })
    .await?;
    assert_eq!(on.claims(t, "after-", 100).await?, 100);
    assert_eq!(on.issued(t).await? as usize, 30 + granted + 100);
    on.audit_ok(t).await?;
    drop(on);
    Ok(())
}
