//! Mutant of the async persister (service/persister.rs): D13, intents held only in memory.

use std::time::Duration;

use crate::{
    CouponEngine, EngineResult,
    domain::template::Template,
    failpoint::Failpoint,
    store::{batch_connection::BatchConnection, redis::PendingIntent},
};

/// D13: the intents leave Redis's pending set first and live only in this task until
/// Postgres takes them (retried here, so no store fault loses them): a queue consumer that
/// acknowledges before it processes. A kill of the server loses them, acknowledged.
pub(crate) async fn write_acknowledged(
    e: &CouponEngine,
    template: &Template,
    intents: &[PendingIntent],
    conn: &mut BatchConnection,
) -> Option<EngineResult<()>> {
    if e.config().variant.leaves_intents_pending_until_stored() {
        return None;
    }
    Some(write_from_memory(e, template, intents, conn).await)
}

async fn write_from_memory(
    e: &CouponEngine,
    template: &Template,
    intents: &[PendingIntent],
    conn: &mut BatchConnection,
) -> EngineResult<()> {
    let taken: Vec<_> = intents
        .iter()
        .map(|i| (&i.request_id, i.coupon_id))
        .collect();
    e.redis().remove_pending(template.id, &taken).await?;
    let _ = e.failpoints().hit(Failpoint::BatchBeforeDecide).await;
    let arbitration = e.config().variant.arbitration();
    loop {
        match conn.decide(template, intents, arbitration).await {
            Ok(_) => return Ok(()),
            Err(err) => {
                tracing::warn!(error = %err, "D13: a batch held in memory, retried");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
