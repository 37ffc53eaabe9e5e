//! Mutants of the claim (service/claim.rs): D7 and D5b claim under another key than the
//! client's, D1 admits without the script's atomicity, D5 drops the intent before it is
//! persisted.

use uuid::Uuid;

use crate::{
    CouponEngine, EngineResult, Variant,
    domain::ids::{RequestId, TemplateId, UserId},
    service::ClaimReceipt,
    store::{
        postgres,
        redis::{ClaimScript, Grant, PendingIntent, RequestRecord},
    },
};

/// D7: every call is unique, so a retry is a new claim: the key the claim runs under.
pub(crate) fn claim_key(e: &CouponEngine, request_id: &RequestId) -> Option<RequestId> {
    (e.config().variant == Variant::D7).then(|| {
        // Not parsed: the suffix may take the key past what a client may send.
        let suffix = &Uuid::new_v4().simple().to_string()[..8];
        RequestId::trusted(format!("{request_id}-{suffix}"))
    })
}

/// D5b: a claim whose outcome is unknown is retried under a fresh key; the key of that
/// retry.
pub(crate) fn retry_key(
    e: &CouponEngine,
    answer: &EngineResult<ClaimReceipt>,
    request_id: &RequestId,
) -> Option<RequestId> {
    let unknown = matches!(answer, Err(err) if err.outcome_unknown());
    (e.config().variant == Variant::D5b && unknown)
        .then(|| RequestId::trusted(format!("{request_id}-retry")))
}

/// D1: GET stock and the user's count, then DECR/INCR in separate calls. litemall #581:
/// count the rows in Postgres, then take the stock, likewise in separate steps.
pub(crate) async fn admit(
    e: &CouponEngine,
    template_id: TemplateId,
    request_id: &RequestId,
    user_id: &UserId,
    limit: i32,
    now_ms: i64,
) -> Option<EngineResult<ClaimScript>> {
    let counts = match e.config().variant {
        Variant::D1 => CountsFrom::Redis,
        Variant::Litemall581 => CountsFrom::Postgres,
        _ => return None,
    };
    let claim = Claim {
        template_id,
        request_id,
        user_id,
        limit,
        now_ms,
    };
    Some(check_then_decrement(e, &claim, counts).await)
}

/// Where a check-then-act claim reads the counts it checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CountsFrom {
    /// D1: Redis's stock and per-user counters.
    Redis,
    /// litemall #581: the rows in Postgres, as a database-only coupon system does.
    Postgres,
}

/// What D1 admits.
struct Claim<'a> {
    template_id: TemplateId,
    request_id: &'a RequestId,
    user_id: &'a UserId,
    limit: i32,
    now_ms: i64,
}

async fn check_then_decrement(
    e: &CouponEngine,
    c: &Claim<'_>,
    counts: CountsFrom,
) -> EngineResult<ClaimScript> {
    let r = e.redis();
    let t = c.template_id;
    let Some(stock) = r.stock(t).await? else {
        return Ok(ClaimScript::NotInitialised);
    };
    let epoch = r.epoch(t).await?.unwrap_or(0);
    // The idempotency record is kept (checked and written in separate steps too), so this
    // mutant differs from the engine only in the missing atomicity.
    if let Some(prior) = r.request_record(t, c.request_id).await?
        && let Some(prior) = RequestRecord::decode(&prior)
    {
        if prior.user_id != c.user_id.as_str() {
            return Ok(ClaimScript::RequestConflict);
        }
        return Ok(ClaimScript::Granted(Grant {
            coupon_id: prior.coupon_id,
            remaining: prior.remaining,
            epoch: prior.epoch,
            claimed_at_ms: prior.at_ms,
            fresh: false,
            pending: r.is_pending(t, c.request_id).await?,
        }));
    }
    let (sold_out, at_limit) = match counts {
        CountsFrom::Redis => (
            stock <= 0,
            r.claimed_by(t, c.user_id).await?.unwrap_or(0) >= i64::from(c.limit),
        ),
        CountsFrom::Postgres => {
            let total = e.template(t).await?.spec.total_stock;
            let (all, mine) = postgres::counted_in_postgres(e.pool(), t, c.user_id).await?;
            (all >= total, mine >= i64::from(c.limit))
        }
    };
    if sold_out {
        return Ok(ClaimScript::StockEmpty);
    }
    if at_limit {
        return Ok(ClaimScript::UserLimit);
    }
    let remaining = r.take_stock(t).await?;
    r.add_claimed(t, c.user_id).await?;
    let coupon_id = Uuid::new_v4();
    r.put_pending(&PendingIntent {
        template_id: t,
        request_id: c.request_id.clone(),
        coupon_id,
        user_id: c.user_id.clone(),
        epoch,
        claimed_at_ms: c.now_ms,
    })
    .await?;
    let record = RequestRecord {
        coupon_id,
        user_id: c.user_id.as_str(),
        remaining,
        epoch,
        at_ms: c.now_ms,
    };
    let ttl_secs = e.config().idempotency_ttl.as_secs();
    r.record_request(t, c.request_id, &record, ttl_secs).await?;
    Ok(ClaimScript::Granted(Grant {
        coupon_id,
        remaining,
        epoch,
        claimed_at_ms: c.now_ms,
        fresh: true,
        pending: true,
    }))
}

/// D5: the intent is dropped before persisting, so a failure after the deduct is never
/// rolled forward nor compensated; the engine's persist step runs after it.
pub(crate) async fn before_persist(e: &CouponEngine, intent: &PendingIntent) -> EngineResult<()> {
    if e.config().variant != Variant::D5 {
        return Ok(());
    }
    e.redis()
        .drop_pending(intent.template_id, &intent.request_id)
        .await?;
    Ok(())
}
