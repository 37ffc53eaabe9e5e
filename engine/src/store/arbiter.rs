//! Postgres decides (docs/ARCHITECTURE.md, "Redis admits, Postgres decides"): a batch of
//! claim intents that Redis admitted is judged in one transaction that holds the template's
//! `template_stock` row, so neither a stale Redis, a lost key nor a rebuild race can make it
//! issue more than `total_stock` coupons or more than `per_user_limit` to one user.
//!
//! One transaction per batch: lock the counter row (the hot row is touched once per batch,
//! not once per claim), look up the batch's request ids and users, decide each intent in
//! arrival order, insert the accepted rows with one statement that also bumps the counter,
//! commit once. Nothing is half-applied: an error rolls the whole batch back.

use std::collections::HashMap;

use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::{
    domain::template::Template,
    error::EngineResult,
    store::{postgres::ms_to_time, redis::PendingIntent},
};

/// Postgres's verdict on one intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
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
}

impl Verdict {
    /// True when Postgres refused what Redis admitted: Redis disagrees with the record.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::StockEmpty | Self::UserLimit)
    }
}

/// Whether Postgres checks the stock and the per-user limit. Only the D8 mutant (the
/// round-1 behaviour: insert whatever Redis admitted) turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbitration {
    /// Postgres decides (the real engine).
    Enforced,
    /// Redis's word is taken (mutant D8).
    TrustRedis,
}

struct Counter {
    counted: i64,
    total: i64,
    epoch: i64,
}

/// Decides and commits one batch of intents of `template`; one verdict per intent, in order.
pub async fn decide_batch(
    pool: &PgPool,
    template: &Template,
    intents: &[PendingIntent],
    arbitration: Arbitration,
) -> EngineResult<Vec<Verdict>> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query(
        "SELECT counted, total_stock, epoch FROM template_stock WHERE template_id = $1 FOR UPDATE",
    )
    .bind(template.id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(crate::error::EngineError::NotFound("template"))?;
    let counter = Counter {
        counted: row.try_get("counted")?,
        total: row.try_get("total_stock")?,
        epoch: row.try_get("epoch")?,
    };
    let known = lookup(&mut tx, template.id, intents).await?;
    let mut decision = Decision::new(&counter, known, i64::from(template.spec.per_user_limit));
    let verdicts: Vec<Verdict> = intents
        .iter()
        .map(|i| decision.decide(i, arbitration))
        .collect();
    if !decision.accepted.is_empty() {
        insert_accepted(&mut tx, template, &decision.accepted, arbitration).await?;
    }
    tx.commit().await?;
    Ok(verdicts)
}

/// What the table already says about a batch's request ids and users.
struct Known {
    /// request id → (coupon id, owner)
    requests: HashMap<String, (Uuid, String)>,
    /// user → coupons counting against the limit
    held: HashMap<String, i64>,
}

async fn lookup(
    tx: &mut sqlx::PgConnection,
    template: Uuid,
    intents: &[PendingIntent],
) -> EngineResult<Known> {
    let rids: Vec<&str> = intents.iter().map(|i| i.request_id.as_str()).collect();
    let users: Vec<&str> = intents.iter().map(|i| i.user_id.as_str()).collect();
    // One round trip for both questions: rows tagged 'r' are stored request ids, rows
    // tagged 'u' are per-user counts.
    let rows = sqlx::query(
        "SELECT 'r' AS kind, claim_request_id AS key, id, user_id, 0::bigint AS n \
           FROM user_coupon WHERE template_id = $1 AND claim_request_id = ANY($2) \
         UNION ALL \
         SELECT 'u', user_id, NULL, user_id, count(*) \
           FROM user_coupon WHERE template_id = $1 AND user_id = ANY($3) AND status <> 'revoked' \
           GROUP BY user_id",
    )
    .bind(template)
    .bind(&rids)
    .bind(&users)
    .fetch_all(&mut *tx)
    .await?;
    let mut known = Known {
        requests: HashMap::new(),
        held: HashMap::new(),
    };
    for r in rows {
        let kind: &str = r.try_get("kind")?;
        let key: String = r.try_get("key")?;
        if kind == "r" {
            known
                .requests
                .insert(key, (r.try_get("id")?, r.try_get("user_id")?));
        } else {
            known.held.insert(key, r.try_get("n")?);
        }
    }
    Ok(known)
}

/// The in-memory side of one batch: decides intents in arrival order against the counter
/// and what is already stored, remembering what it accepted so far.
struct Decision<'a> {
    counter: &'a Counter,
    known: Known,
    limit: i64,
    accepted: Vec<&'a PendingIntent>,
}

impl<'a> Decision<'a> {
    fn new(counter: &'a Counter, known: Known, limit: i64) -> Self {
        Self {
            counter,
            known,
            limit,
            accepted: Vec::new(),
        }
    }

    fn decide(&mut self, i: &'a PendingIntent, arbitration: Arbitration) -> Verdict {
        if i.epoch < self.counter.epoch {
            return Verdict::Fenced;
        }
        if i.epoch > self.counter.epoch {
            return Verdict::EpochAhead;
        }
        if let Some((coupon_id, user_id)) = self.known.requests.get(&i.request_id) {
            return if *coupon_id == i.coupon_id {
                Verdict::Stored
            } else {
                Verdict::Duplicate {
                    coupon_id: *coupon_id,
                    user_id: user_id.clone(),
                }
            };
        }
        if arbitration == Arbitration::Enforced {
            if self.counter.counted + self.accepted.len() as i64 >= self.counter.total {
                return Verdict::StockEmpty;
            }
            if self.known.held.get(&i.user_id).copied().unwrap_or(0) >= self.limit {
                return Verdict::UserLimit;
            }
        }
        *self.known.held.entry(i.user_id.clone()).or_insert(0) += 1;
        self.known
            .requests
            .insert(i.request_id.clone(), (i.coupon_id, i.user_id.clone()));
        self.accepted.push(i);
        Verdict::Stored
    }
}

async fn insert_accepted(
    tx: &mut sqlx::PgConnection,
    template: &Template,
    accepted: &[&PendingIntent],
    arbitration: Arbitration,
) -> EngineResult<()> {
    let n = accepted.len();
    let (mut ids, mut users, mut rids) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut at, mut from, mut until) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in accepted {
        let claimed_at = ms_to_time(i.claimed_at_ms);
        let (f, u) = template.coupon_validity(claimed_at);
        ids.push(i.coupon_id);
        users.push(i.user_id.as_str());
        rids.push(i.request_id.as_str());
        at.push(claimed_at);
        from.push(f);
        until.push(u);
    }
    // The insert and the counter bump are one statement: the counter moves by exactly the
    // rows that went in. The round-1 behaviour (D8) had no counter to keep.
    let bump = match arbitration {
        Arbitration::Enforced => {
            "UPDATE template_stock SET counted = counted + (SELECT count(*) FROM ins) \
             WHERE template_id = $1"
        }
        Arbitration::TrustRedis => "SELECT count(*) FROM ins",
    };
    let sql = format!(
        "WITH ins AS ( \
           INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id, \
                                    claimed_at, valid_from, valid_until) \
           SELECT u.id, $1, u.user_id, 'issued', u.rid, u.at, u.vf, u.vu \
           FROM UNNEST($2::uuid[], $3::text[], $4::text[], $5::timestamptz[], \
                       $6::timestamptz[], $7::timestamptz[]) AS u(id, user_id, rid, at, vf, vu) \
           ON CONFLICT (template_id, claim_request_id) DO NOTHING RETURNING 1) {bump}"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(template.id)
        .bind(&ids)
        .bind(&users)
        .bind(&rids)
        .bind(&at)
        .bind(&from)
        .bind(&until)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
