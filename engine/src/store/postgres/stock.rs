//! `template_stock`: the per-template counter the claim batches decide by, and the fencing
//! epoch. Taking its row serialises claim batches, refunds to stock and rebuilds.

use sqlx::PgConnection;

use crate::{
    domain::ids::TemplateId,
    error::{EngineError, EngineResult},
};

/// Takes the template's advisory lock for this transaction: shared for writers that must
/// not cross a rebuild (persist, outbox relay), exclusive for the rebuild itself.
pub async fn lock_template(
    conn: &mut PgConnection,
    template: TemplateId,
    exclusive: bool,
) -> EngineResult<()> {
    let sql = if exclusive {
        "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))"
    } else {
        "SELECT pg_advisory_xact_lock_shared(hashtextextended($1::text, 0))"
    };
    sqlx::query(sql).bind(template).execute(conn).await?;
    Ok(())
}

/// The template's current fencing epoch.
pub async fn epoch(conn: &mut PgConnection, template: TemplateId) -> EngineResult<i64> {
    sqlx::query_scalar("SELECT epoch FROM template_stock WHERE template_id = $1")
        .bind(template)
        .fetch_optional(conn)
        .await?
        .ok_or(EngineError::NotFound("template"))
}

/// Gives the template a new epoch from the sequence (rebuild, under the exclusive lock):
/// a number an aborted rebuild consumed is never handed out again. Also takes the
/// template's counter row, so no claim batch or refund to stock runs until commit.
pub async fn bump_epoch(conn: &mut PgConnection, template: TemplateId) -> EngineResult<i64> {
    sqlx::query_scalar(
        "UPDATE template_stock SET epoch = nextval('coupon_epoch_seq') \
         WHERE template_id = $1 RETURNING epoch",
    )
    .bind(template)
    .fetch_optional(conn)
    .await?
    .ok_or(EngineError::NotFound("template"))
}

/// A return_to_stock refund gives its coupon's place back in the counter (inside the
/// refund's transaction, so it cannot race a rebuild or a claim batch).
pub async fn return_to_stock(conn: &mut PgConnection, template: TemplateId) -> EngineResult<()> {
    sqlx::query("UPDATE template_stock SET counted = counted - 1 WHERE template_id = $1")
        .bind(template)
        .execute(conn)
        .await?;
    Ok(())
}
