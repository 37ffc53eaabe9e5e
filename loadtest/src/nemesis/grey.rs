//! Grey faults of a load run (docs/ARCHITECTURE.md, "Deadlines"): a store that stops
//! answering without closing anything (its link blackholed, or the server paused), and a
//! server killed mid-batch. Each begins once the sale is under way, lasts past the request
//! deadline, and is healed; the report then shows, from the shoppers' own answers, how long
//! after the fault the first refusal came and how long after the heal the first grant
//! (`recovery.rs`).

use std::{sync::Arc, time::Duration};

use coupon_testkit::{
    fault_proxy::{FaultProxy, LinkMode},
    pg_failover::Replication,
};

use super::{GREY_HOLD, Log, Mark, NemesisEvent, NemesisKind, Target, mid_sale, or_unknown};

/// Runs `kind` against `t`; `run_for` is the planned length of the load.
pub(crate) async fn run(kind: NemesisKind, t: Target, run_for: Duration) -> Vec<NemesisEvent> {
    let mut log = Log::new(t.epoch_unix_us);
    let stock_then = mid_sale(&t, &log, run_for).await;
    let stock = or_unknown(stock_then);
    match kind {
        NemesisKind::PgBlackhole => {
            blackhole(&mut log, t.grey.pg_link.clone(), "postgres", &stock).await
        }
        NemesisKind::RedisBlackhole => {
            blackhole(&mut log, t.grey.redis_link.clone(), "redis", &stock).await;
        }
        NemesisKind::PgPause => pause(&mut log, &t, &stock).await,
        NemesisKind::PgPartitionOne => {
            let link = t.grey.first_server_pg_link.clone();
            blackhole(
                &mut log,
                link,
                "postgres (server 1 alone; the others go on)",
                &stock,
            )
            .await;
        }
        NemesisKind::ServerKill => server_kill(&mut log, &t, &stock).await,
        NemesisKind::PgFailover => failover(&mut log, &t, &stock).await,
        other => log.fail(format!("{other:?} is not a grey fault")),
    }
    log.events
}

async fn blackhole(log: &mut Log, link: Option<Arc<FaultProxy>>, store: &str, stock: &str) {
    let Some(link) = link else {
        log.fail(format!("no fault proxy in front of {store}: nothing done"));
        return;
    };
    link.set(LinkMode::Blackhole);
    log.mark(
        format!(
            "the link to {store} blackholed: bytes held, nothing reset (redis stock then: {stock})"
        ),
        Mark::Fault,
    );
    tokio::time::sleep(GREY_HOLD).await;
    link.set(LinkMode::Pass);
    log.mark(
        format!("the link to {store} healed (held bytes delivered)"),
        Mark::Heal,
    );
}

async fn pause(log: &mut Log, t: &Target, stock: &str) {
    let Some(pg) = t.grey.postgres.clone() else {
        log.fail("no Postgres of the run's own to pause: nothing done".into());
        return;
    };
    let p = pg.clone();
    match tokio::task::spawn_blocking(move || p.pause()).await {
        Ok(Ok(())) => log.mark(
            format!("postgres paused (SIGSTOP of the postmaster and every backend; redis stock then: {stock})"),
            Mark::Fault,
        ),
        other => {
            log.fail(format!("pausing postgres failed: {other:?}"));
            return;
        }
    }
    tokio::time::sleep(GREY_HOLD).await;
    match tokio::task::spawn_blocking(move || pg.resume()).await {
        Ok(Ok(())) => log.mark("postgres resumed (SIGCONT)".into(), Mark::Heal),
        other => log.fail(format!("resuming postgres failed: {other:?}")),
    }
}

/// How long the sale goes on with the standby cut off before the primary fails: claims keep
/// being acknowledged (asynchronous replication) or wait for the standby (synchronous).
const LAG_BEFORE_FAILOVER: Duration = Duration::from_secs(2);

async fn failover(log: &mut Log, t: &Target, stock: &str) {
    let Some(pair) = t.grey.replicated_postgres.clone() else {
        log.fail("no Postgres primary and standby of the run's own: nothing done".into());
        return;
    };
    pair.hold_replication();
    let replication = match pair.replication() {
        Replication::Synchronous => "synchronous: commits now wait for it",
        Replication::Asynchronous => "asynchronous: the primary goes on acknowledging",
    };
    log.mark(
        format!("the standby's replication link held ({replication}; redis stock then: {stock})"),
        Mark::Fault,
    );
    tokio::time::sleep(LAG_BEFORE_FAILOVER).await;
    let p = pair.clone();
    match tokio::task::spawn_blocking(move || p.fail_over()).await {
        Ok(Ok(f)) => log.mark(
            format!(
                "primary {} stopped (immediate), standby {} promoted in {:.1} s, the servers' \
                 address moved to it",
                f.old_primary,
                f.new_primary,
                f.promoted_in.as_secs_f64()
            ),
            Mark::Heal,
        ),
        other => log.fail(format!("failing over failed: {other:?}")),
    }
}

async fn server_kill(log: &mut Log, t: &Target, stock: &str) {
    let Some(fleet) = t.fleet.clone() else {
        log.fail("no coupon-server processes to kill (--servers N): nothing done".into());
        return;
    };
    let mut fleet = fleet.lock().await;
    match fleet.kill(0).await {
        Ok(()) => log.mark(
            format!(
                "server 1 SIGKILLed mid-sale, its batches in flight (redis stock then: {stock})"
            ),
            Mark::Fault,
        ),
        Err(e) => {
            log.fail(format!("killing server 1 failed: {e:#}"));
            return;
        }
    }
    // Down for a moment, as a crashed process restarted by its supervisor is.
    tokio::time::sleep(Duration::from_secs(1)).await;
    match fleet.restart(0).await {
        Ok(()) => log.mark("server 1 restarted and healthy".into(), Mark::Heal),
        Err(e) => log.fail(format!("restarting server 1 failed: {e:#}")),
    }
}
