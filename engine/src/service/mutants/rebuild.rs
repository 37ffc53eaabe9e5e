//! Mutants of the rebuild (service/rebuild.rs): D6 rebuilds from the total stock, D6b counts
//! without fencing late writers.

use crate::{
    CouponEngine, EngineResult, Variant, domain::ids::TemplateId, service::Rebuilt, store::postgres,
};

/// D6 and D6b: the broken rebuilds.
pub(crate) async fn rebuild(
    e: &CouponEngine,
    template_id: TemplateId,
) -> Option<EngineResult<Rebuilt>> {
    match e.config().variant {
        Variant::D6 => Some(rebuild_from_total(e, template_id).await),
        Variant::D6b => Some(rebuild_unfenced(e, template_id).await),
        _ => None,
    }
}

/// What the correct rebuild also does: remember recent claim outcomes, so these mutants
/// differ from it only in their defect.
async fn remember_requests(
    e: &CouponEngine,
    conn: &mut sqlx::PgConnection,
    template_id: TemplateId,
    epoch: i64,
) -> EngineResult<()> {
    let window = e.config().idempotency_ttl.as_millis() as i64;
    let recent = postgres::recent_claims(conn, template_id, window).await?;
    let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    e.redis()
        .restore_requests(template_id, &recent, epoch, 0, now_ms, window)
        .await?;
    Ok(())
}

async fn rebuild_from_total(e: &CouponEngine, template_id: TemplateId) -> EngineResult<Rebuilt> {
    let t = e.template(template_id).await?;
    let mut conn = e.pool().acquire().await?;
    let epoch = postgres::epoch(&mut conn, template_id).await?;
    remember_requests(e, &mut conn, template_id, epoch).await?;
    e.redis()
        .rebuild(template_id, t.spec.total_stock, epoch, &[])
        .await?;
    Ok(Rebuilt::Epoch(epoch))
}

async fn rebuild_unfenced(e: &CouponEngine, template_id: TemplateId) -> EngineResult<Rebuilt> {
    let t = e.template(template_id).await?;
    let mut conn = e.pool().acquire().await?;
    // Counts without the exclusive lock and without bumping the epoch: a claim deducted in
    // the lost Redis can still be written after this count.
    let epoch = postgres::epoch(&mut conn, template_id).await?;
    let claimed = postgres::counted_per_user(&mut conn, template_id).await?;
    let counted: i64 = claimed.iter().map(|(_, n)| n).sum();
    remember_requests(e, &mut conn, template_id, epoch).await?;
    e.redis()
        .rebuild(
            template_id,
            (t.spec.total_stock - counted).max(0),
            epoch,
            &claimed,
        )
        .await?;
    Ok(Rebuilt::Epoch(epoch))
}
