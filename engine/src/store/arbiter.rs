//! Postgres decides (docs/ARCHITECTURE.md, "Group commit"): a batch of
//! claim intents that Redis admitted is judged in one transaction that holds the template's
//! `template_stock` row, so neither a stale Redis, a lost key nor a rebuild race can make it
//! issue more than `total_stock` coupons or more than `per_user_limit` to one user.
//!
//! One transaction and one round trip per batch: `coupon_decide_claims` (a function of the
//! schema: its current text is `engine/sql/claim_decision.sql`) inserts the batch's rows,
//! then locks the counter row (the hot row is touched once per batch, not once per claim,
//! and other servers' batches of the template insert while it is held) and checks the stock, the epoch and each user's count
//! against everything committed before it; a batch that is not stored whole (a retry, a
//! refusal, a fence) takes its rows back and is decided intent by intent in arrival order
//! under the lock. It commits once. Nothing is half-applied: an error rolls the whole batch
//! back.
//!
//! The commit is synchronous, so a verdict returned is on disk and may be answered at once;
//! the batch that queues while one commits (its WAL flush included) is the next batch.

use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use crate::{
    domain::{
        ids::{RequestId, TemplateId},
        template::Template,
    },
    error::{EngineError, EngineResult},
    store::{postgres::ms_to_time, redis::PendingIntent},
};

/// Postgres's ruling on one intent (the arbiter rules; "verdict" is the
/// linearizability checker's word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    /// The row exists with the intent's coupon id (inserted now or earlier).
    Stored,
    /// Another coupon already holds this request id: the intent is a duplicate.
    Duplicate {
        /// The coupon stored for the request id.
        coupon_id: Uuid,
        /// Its owner.
        user_id: String,
    },
    /// Redis admitted it, but the template's counted coupons are already at `total_stock`.
    StockEmpty,
    /// Redis admitted it, but the user already holds `per_user_limit` coupons.
    UserLimit,
    /// The intent's epoch is older than the template's: a rebuild counted without it.
    Fenced,
    /// The intent's epoch is newer than Postgres knows: Redis holds a rebuild whose
    /// transaction never committed, and must be rebuilt again.
    EpochAhead,
    /// By Postgres's clock the claim window has not opened (the admitting server's clock
    /// runs fast).
    WindowNotOpen,
    /// By Postgres's clock the claim window has closed (the admitting server's clock runs
    /// slow).
    WindowClosed,
}

impl Ruling {
    /// True when Postgres refused what Redis admitted: Redis disagrees with the record.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::StockEmpty | Self::UserLimit)
    }
}

/// Whose clock judges the template's claim window in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Postgres's (`coupon_decide_claims_in_window`): the sync group commit, whose claims
    /// are answered from the decision, so one clock decides for every server.
    JudgedByPostgres,
    /// Not judged again: the async persister and the reconciler store claims already
    /// admitted (async: already acknowledged), which a late window check would turn into
    /// lost acknowledgements.
    AsAdmitted,
}

/// Whether Postgres checks the stock and the per-user limit. Only the D8 mutant (the
/// round-1 behaviour: insert whatever Redis admitted) turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbitration {
    /// Postgres decides (the real engine).
    Enforced,
    /// Redis's word is taken, the counter kept (mutant D8 and the Redis-side mutants; not
    /// in a build without them, so no release server can run it).
    #[cfg(feature = "mutants")]
    TrustRedis,
}

/// Decides and commits one batch of intents of `template`; one verdict per intent, in
/// order, on disk when returned.
pub async fn decide_batch(
    pool: &PgPool,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
) -> EngineResult<Vec<Ruling>> {
    let mut conn = pool.acquire().await?;
    decide_batch_on(&mut conn, template, intents, arbitration).await
}

/// [`decide_batch`] on a connection the caller holds (the group commit keeps one across
/// back-to-back batches). The connection must not be in a transaction.
pub async fn decide_batch_on(
    conn: &mut PgConnection,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
) -> EngineResult<Vec<Ruling>> {
    decide_batch_within(conn, template, intents, arbitration, Window::AsAdmitted).await
}

/// Several templates' batches decided in one transaction, committed (and flushed) once, in
/// template id order: each batch takes its own counter row, and two such transactions, from
/// any servers, take the rows they share in the same order, so they cannot deadlock. A batch
/// per template per transaction paid a WAL flush for each: claims spread over many live
/// templates ran at a fifth of one template's rate (docs/speed-log.md). The verdicts come
/// back in `batches`' order. Postgres must arbitrate (the mutants that trust Redis decide
/// one template at a time).
pub async fn decide_batches_together(
    conn: &mut PgConnection,
    batches: &[(&Template, &[PendingIntent])],
    window: Window,
) -> EngineResult<Vec<Vec<Ruling>>> {
    // Templates whose window Postgres must judge take their own function; the rest (every
    // template without a claim window, or all when the window is not judged) are decided
    // together by one call, which takes its counter rows in template order first: both
    // groups lock in template order, the windowless group before the other.
    let (mut together, mut alone): (Vec<usize>, Vec<usize>) = (0..batches.len()).partition(|&i| {
        window == Window::AsAdmitted
            || batches[i].0.spec.claim_starts_at.is_none()
                && batches[i].0.spec.claim_ends_at.is_none()
    });
    if together.len() < 2 {
        alone.append(&mut together);
    }
    alone.sort_by_key(|&i| batches[i].0.id);
    let mut tx = sqlx::Connection::begin(conn).await?;
    let mut verdicts = vec![Vec::new(); batches.len()];
    if !together.is_empty() {
        let parts: Vec<(&Template, &[PendingIntent])> =
            together.iter().map(|&i| batches[i]).collect();
        for (i, v) in together.iter().zip(decide_across(&mut tx, &parts).await?) {
            verdicts[*i] = v;
        }
    }
    for i in alone {
        let (template, intents) = batches[i];
        verdicts[i] = decide_on(&mut tx, template, intents, Arbitration::Enforced, window).await?;
    }
    tx.commit().await?;
    Ok(verdicts)
}

/// Several templates' batches by one call of `coupon_decide_claims_across` (migration
/// `20261209000001`): the per-template decision, taken for all at once, so that a batch of
/// many templates pays each statement once rather than once per template.
async fn decide_across(
    conn: &mut PgConnection,
    parts: &[(&Template, &[PendingIntent])],
) -> EngineResult<Vec<Vec<Ruling>>> {
    let n: usize = parts.iter().map(|(_, i)| i.len()).sum();
    let mut templates = Vec::with_capacity(n);
    let mut limits = Vec::with_capacity(n);
    let (mut ids, mut users, mut rids, mut epochs) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut at, mut from, mut until) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    // Where each claim's verdict goes: (part, position in it).
    let mut slots = Vec::with_capacity(n);
    for (p, (template, intents)) in parts.iter().enumerate() {
        for (k, i) in intents.iter().enumerate() {
            let claimed_at = ms_to_time(i.claimed_at_ms);
            let (f, u) = template.coupon_validity(claimed_at);
            templates.push(template.id.as_uuid());
            limits.push(i64::from(template.spec.per_user_limit));
            ids.push(i.coupon_id);
            users.push(i.user_id.as_str());
            rids.push(i.request_id.as_str());
            epochs.push(i.epoch);
            at.push(claimed_at);
            from.push(f);
            until.push(u);
            slots.push((p, k));
        }
    }
    let rows = sqlx::query(
        "SELECT ord, verdict, coupon_id, owner FROM coupon_decide_claims_across($1, $2, $3, \
         $4, $5, $6, $7, $8, $9)",
    )
    .bind(&templates)
    .bind(&limits)
    .bind(&ids)
    .bind(&users)
    .bind(&rids)
    .bind(&epochs)
    .bind(&at)
    .bind(&from)
    .bind(&until)
    .fetch_all(conn)
    .await?;
    let mut verdicts: Vec<Vec<Option<Ruling>>> =
        parts.iter().map(|(_, i)| vec![None; i.len()]).collect();
    for row in &rows {
        let ord: i64 = row.try_get("ord")?;
        let Some(&(p, k)) = usize::try_from(ord - 1).ok().and_then(|o| slots.get(o)) else {
            return Err(EngineError::Unavailable(format!(
                "the claim batch answered a verdict for claim {ord} of {n}"
            )));
        };
        verdicts[p][k] = Some(verdict_from_row(row)?);
    }
    verdicts
        .into_iter()
        .map(|part| {
            part.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| {
                EngineError::Unavailable(format!(
                    "the claim batch answered {} verdicts for {n} intents",
                    rows.len()
                ))
            })
        })
        .collect()
}

/// [`decide_batch_on`], the claim window judged as `window` says (only when Postgres
/// arbitrates: the mutants that trust Redis take its word for the window too).
pub async fn decide_batch_within(
    conn: &mut PgConnection,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
    window: Window,
) -> EngineResult<Vec<Ruling>> {
    match arbitration {
        // Autocommit: the function's statements are one transaction, committed once.
        Arbitration::Enforced => decide_on(conn, template, intents, arbitration, window).await,
        #[cfg(feature = "mutants")]
        Arbitration::TrustRedis => decide_trusting_redis(conn, template, intents).await,
    }
}

/// The batch of the mutants that trust Redis (D1, D6, D6b, D8): whatever Redis admitted is
/// stored, and the stock counter still follows the rows, as the engine's does, up to the
/// stock (the schema's check stops it there; past it the rows oversell, I1). The mutant then
/// differs from the engine in what it lets through, so the harness must catch it by what it
/// issues, not by a counter it neglects: a counter left behind failed I2 at the first claim,
/// fault or no fault. The counter is recounted, not bumped: the decision holds the counter
/// row until this transaction ends, so the count sees every batch committed before it, and
/// a batch that raced this one on the same request id adds nothing twice.
#[cfg(feature = "mutants")]
async fn decide_trusting_redis(
    conn: &mut PgConnection,
    template: &Template,
    intents: &[PendingIntent],
) -> EngineResult<Vec<Ruling>> {
    let mut tx = sqlx::Connection::begin(conn).await?;
    let verdicts = decide_on(
        &mut tx,
        template,
        intents,
        Arbitration::TrustRedis,
        Window::AsAdmitted,
    )
    .await?;
    sqlx::query(
        "UPDATE template_stock SET counted = LEAST(total_stock, \
           (SELECT count(*) FROM user_coupon \
             WHERE template_id = $1 AND status <> 'revoked')) \
         WHERE template_id = $1",
    )
    .bind(template.id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(verdicts)
}

/// Mutant D9's batch: the same decision in a transaction that does not wait for its WAL
/// flush, so its verdicts are answered before they are on disk.
#[cfg(feature = "mutants")]
pub async fn decide_batch_unflushed(
    pool: &PgPool,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
) -> EngineResult<Vec<Ruling>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    let verdicts = decide_on(&mut tx, template, intents, arbitration, Window::AsAdmitted).await?;
    tx.commit().await?;
    Ok(verdicts)
}

/// Returns once everything this connection's server committed before the call is on disk
/// (as its `synchronous_commit` makes any commit durable).
async fn wait_durable(conn: &mut PgConnection) -> EngineResult<()> {
    sqlx::query("SELECT coupon_claims_durable()")
        .execute(conn)
        .await?;
    Ok(())
}

/// The coupon and owner stored for `request_id`, durable before it is returned. The engine's
/// batches commit synchronously, so a row it wrote is on disk once visible; the barrier (on
/// the connection that read the row) makes the answer durable whoever wrote it and however
/// (a mutant, a commit made by hand). Only a found row pays it: an answer built on no row
/// (a refusal) costs no flush, which matters in a sold-out flood right after a failover.
pub async fn durable_claim_by_request(
    pool: &PgPool,
    template_id: TemplateId,
    request_id: &RequestId,
) -> EngineResult<Option<(Uuid, String)>> {
    let mut conn = pool.acquire().await?;
    let stored = super::postgres::claim_by_request(&mut conn, template_id, request_id).await?;
    if stored.is_some() {
        wait_durable(&mut conn).await?;
    }
    Ok(stored)
}

/// Runs the batch's decision on `conn`, in whatever transaction it is in.
async fn decide_on(
    conn: &mut PgConnection,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
    window: Window,
) -> EngineResult<Vec<Ruling>> {
    let n = intents.len();
    let (mut ids, mut users, mut rids, mut epochs) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut at, mut from, mut until) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in intents {
        let claimed_at = ms_to_time(i.claimed_at_ms);
        let (f, u) = template.coupon_validity(claimed_at);
        ids.push(i.coupon_id);
        users.push(i.user_id.as_str());
        rids.push(i.request_id.as_str());
        epochs.push(i.epoch);
        at.push(claimed_at);
        from.push(f);
        until.push(u);
    }
    let sql = match window {
        Window::JudgedByPostgres => {
            "SELECT verdict, coupon_id, owner FROM coupon_decide_claims_in_window($1, $2, $3, \
             $4, $5, $6, $7, $8, $9, $10)"
        }
        Window::AsAdmitted => {
            "SELECT verdict, coupon_id, owner FROM coupon_decide_claims($1, $2, $3, $4, $5, $6, \
             $7, $8, $9, $10)"
        }
    };
    let rows = sqlx::query(sql)
        .bind(template.id)
        .bind(arbitration == Arbitration::Enforced)
        .bind(i64::from(template.spec.per_user_limit))
        .bind(&ids)
        .bind(&users)
        .bind(&rids)
        .bind(&epochs)
        .bind(&at)
        .bind(&from)
        .bind(&until)
        .fetch_all(conn)
        .await?;
    if rows.len() != n {
        return Err(EngineError::Unavailable(format!(
            "the claim batch answered {} verdicts for {n} intents",
            rows.len()
        )));
    }
    rows.iter().map(verdict_from_row).collect()
}

fn verdict_from_row(row: &sqlx::postgres::PgRow) -> EngineResult<Ruling> {
    let verdict: &str = row.try_get("verdict")?;
    Ok(match verdict {
        "stored" => Ruling::Stored,
        "duplicate" => Ruling::Duplicate {
            coupon_id: row
                .try_get::<Option<Uuid>, _>("coupon_id")?
                .unwrap_or_default(),
            user_id: row
                .try_get::<Option<String>, _>("owner")?
                .unwrap_or_default(),
        },
        "stock_empty" => Ruling::StockEmpty,
        "user_limit" => Ruling::UserLimit,
        "fenced" => Ruling::Fenced,
        "epoch_ahead" => Ruling::EpochAhead,
        "not_open" => Ruling::WindowNotOpen,
        "closed" => Ruling::WindowClosed,
        other => {
            return Err(EngineError::Unavailable(format!(
                "unknown claim verdict {other:?} from postgres"
            )));
        }
    })
}
