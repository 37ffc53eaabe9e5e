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

/// What can change whether a sold-out template may grant again: its stock, how many places
/// came back (`stock_returns` counts every return and stock change), and its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct StockVersion {
    /// The template's stock.
    pub total_stock: i64,
    /// Coupons counting against it.
    pub counted: i64,
    /// Places given back or stock changes so far.
    pub stock_returns: i64,
    /// The fencing epoch.
    pub epoch: i64,
}

impl StockVersion {
    /// No claim can be granted until the version changes.
    pub fn sold_out(&self) -> bool {
        self.counted >= self.total_stock
    }
}

/// The template's [`StockVersion`] (None: no such template).
pub async fn stock_version(
    pool: &sqlx::PgPool,
    template: TemplateId,
) -> EngineResult<Option<StockVersion>> {
    Ok(sqlx::query_as(
        "SELECT total_stock, counted, stock_returns, epoch FROM template_stock \
         WHERE template_id = $1",
    )
    .bind(template)
    .fetch_optional(pool)
    .await?)
}

/// A sold-out template's version and the request ids of every claim it granted, read in one
/// statement (one snapshot); None when it is not sold out in Postgres or has more than
/// `most` coupons (the set would cost too much memory).
pub async fn sold_out_grants(
    pool: &sqlx::PgPool,
    template: TemplateId,
    most: i64,
) -> EngineResult<Option<(StockVersion, Vec<String>)>> {
    let row: Option<(i64, i64, i64, i64, Vec<String>)> = sqlx::query_as(
        "SELECT s.total_stock, s.counted, s.stock_returns, s.epoch, \
                ARRAY(SELECT c.claim_request_id FROM user_coupon c \
                      WHERE c.template_id = s.template_id) \
         FROM template_stock s \
         WHERE s.template_id = $1 AND s.counted >= s.total_stock AND s.total_stock <= $2",
    )
    .bind(template)
    .bind(most)
    .fetch_optional(pool)
    .await?;
    Ok(
        row.map(|(total_stock, counted, stock_returns, epoch, ids)| {
            (
                StockVersion {
                    total_stock,
                    counted,
                    stock_returns,
                    epoch,
                },
                ids,
            )
        }),
    )
}
