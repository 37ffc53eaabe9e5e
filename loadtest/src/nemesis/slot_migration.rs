//! `--nemesis slot-migration`: mid-sale, the hot template's cluster slot is resharded to
//! another master, `MIGRATE` ten keys at a time as `redis-cli --cluster reshard` moves them
//! (testkit's `SlotMigration` says why not that tool itself). The sale must pass, and the
//! report gives the share of claims answered 503 or not at all while the slot moved.
//!
//! The slot holds what the engine put there: a template's few keys (no key per request any
//! more, so a sale's slot no longer grows with its claims and moves in a few `MIGRATE`s).

use std::{sync::Arc, time::Duration};

use coupon_testkit::redis_cluster::LocalCluster;
use tokio::sync::Mutex;

use super::{Log, Mark, NemesisEvent, Target, mid_sale, or_unknown};

/// Keys per `MIGRATE` (`redis-cli --cluster reshard`'s default pipeline).
const PER_CALL: usize = 10;

pub(super) async fn run(
    t: Target,
    cluster: Arc<Mutex<LocalCluster>>,
    run_for: Duration,
) -> Vec<NemesisEvent> {
    let mut log = Log::new(t.epoch_unix_us);
    let stock_then = mid_sale(&t, &log, run_for).await;
    let key = t.engine.redis().keys(t.template).stock;
    let c = cluster.clone();
    let began = std::time::Instant::now();
    let migration =
        match tokio::task::spawn_blocking(move || c.blocking_lock().begin_slot_migration(&key))
            .await
        {
            Ok(Ok(m)) => m,
            other => {
                log.fail(format!("starting the slot migration failed: {other:?}"));
                return log.events;
            }
        };
    log.mark(
        format!(
            "slot {} of the hot template migrating from :{} to :{} (redis stock then: {})",
            migration.slot,
            migration.source,
            migration.target,
            or_unknown(stock_then)
        ),
        Mark::Fault,
    );
    let m = migration.clone();
    match tokio::task::spawn_blocking(move || m.finish(PER_CALL, began)).await {
        Ok(Ok(done)) => log.mark(
            format!(
                "slot {} now served by :{}: {} keys moved, {PER_CALL} per MIGRATE, in {:.2} s",
                migration.slot,
                migration.target,
                done.keys,
                done.took.as_secs_f64()
            ),
            Mark::Heal,
        ),
        other => log.fail(format!("the slot migration failed: {other:?}")),
    }
    log.events
}
