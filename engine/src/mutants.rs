//! The defect mutants (feature `mutants`; docs/ARCHITECTURE.md, "Mutants"). Each function
//! below is the broken counterpart of one step of the real engine, reached from a hook that
//! returns `None` for every other variant, so the correct code paths stay untouched. Never
//! enable in production.

use std::time::Duration;

use sqlx::Row;
use uuid::Uuid;

use crate::{
    CouponEngine, CouponStatus, EngineError, EngineResult, RefundPolicy, Variant,
    service::{Rebuilt, Redemption, RefundReceipt},
    store::{
        keys::coupon_lock,
        postgres,
        redis::{ClaimScript, Grant},
    },
};

/// D7: the key a claim is recorded under. The mutant makes every call unique, so a retry
/// is a new claim.
pub(crate) fn claim_key(variant: Variant, request_id: &str) -> String {
    if variant == Variant::D7 {
        format!("{request_id}-{}", &Uuid::new_v4().simple().to_string()[..8])
    } else {
        request_id.to_owned()
    }
}

/// D1: GET stock and the user's count, then DECR/INCR in separate calls.
pub(crate) async fn claim_script(
    e: &CouponEngine,
    template: Uuid,
    request_id: &str,
    user_id: &str,
    limit: i32,
    now_ms: i64,
) -> Option<EngineResult<ClaimScript>> {
    if e.config().variant != Variant::D1 {
        return None;
    }
    Some(check_then_decrement(e, template, request_id, user_id, limit, now_ms).await)
}

async fn check_then_decrement(
    e: &CouponEngine,
    template: Uuid,
    request_id: &str,
    user_id: &str,
    limit: i32,
    now_ms: i64,
) -> EngineResult<ClaimScript> {
    let k = e.redis().keys(template);
    let mut c = e.redis().connection();
    let stock: Option<i64> = redis::cmd("GET").arg(&k.stock).query_async(&mut c).await?;
    let Some(stock) = stock else {
        return Ok(ClaimScript::NotInitialised);
    };
    let epoch: i64 = redis::cmd("GET")
        .arg(&k.epoch)
        .query_async::<Option<i64>>(&mut c)
        .await?
        .unwrap_or(0);
    // The idempotency record is kept (checked and written in separate steps too), so this
    // mutant differs from the engine only in the missing atomicity.
    let prior: Option<String> = redis::cmd("GET")
        .arg(k.req(request_id))
        .query_async(&mut c)
        .await?;
    if let Some(prior) = prior {
        let f: Vec<&str> = prior.split('|').collect();
        if let [coupon, user, remaining, prior_epoch, at] = f[..] {
            if user != user_id {
                return Ok(ClaimScript::RequestConflict);
            }
            let pending: bool = redis::cmd("HEXISTS")
                .arg(&k.pending)
                .arg(request_id)
                .query_async(&mut c)
                .await?;
            return Ok(ClaimScript::Granted(Grant {
                coupon_id: coupon.parse().unwrap_or_default(),
                remaining: remaining.parse().unwrap_or_default(),
                epoch: prior_epoch.parse().unwrap_or_default(),
                claimed_at_ms: at.parse().unwrap_or_default(),
                fresh: false,
                pending,
            }));
        }
    }
    if stock <= 0 {
        return Ok(ClaimScript::StockEmpty);
    }
    let held: Option<i64> = redis::cmd("HGET")
        .arg(&k.claimed)
        .arg(user_id)
        .query_async(&mut c)
        .await?;
    if held.unwrap_or(0) >= i64::from(limit) {
        return Ok(ClaimScript::UserLimit);
    }
    let remaining: i64 = redis::cmd("DECR").arg(&k.stock).query_async(&mut c).await?;
    redis::cmd("HINCRBY")
        .arg(&k.claimed)
        .arg(user_id)
        .arg(1)
        .query_async::<i64>(&mut c)
        .await?;
    let coupon_id = Uuid::new_v4();
    redis::cmd("HSET")
        .arg(&k.pending)
        .arg(request_id)
        .arg(format!("{coupon_id}|{user_id}|{epoch}|{now_ms}"))
        .query_async::<i64>(&mut c)
        .await?;
    redis::cmd("SET")
        .arg(k.req(request_id))
        .arg(format!(
            "{coupon_id}|{user_id}|{remaining}|{epoch}|{now_ms}"
        ))
        .arg("EX")
        .arg(e.config().idempotency_ttl.as_secs().max(1))
        .query_async::<()>(&mut c)
        .await?;
    Ok(ClaimScript::Granted(Grant {
        coupon_id,
        remaining,
        epoch,
        claimed_at_ms: now_ms,
        fresh: true,
        pending: true,
    }))
}

/// D5: the intent is dropped before persisting, so a failure after the deduct is never
/// rolled forward nor compensated.
pub(crate) async fn before_persist(
    e: &CouponEngine,
    template: Uuid,
    request_id: &str,
) -> EngineResult<()> {
    if e.config().variant == Variant::D5 {
        redis::cmd("HDEL")
            .arg(e.redis().keys(template).pending)
            .arg(request_id)
            .query_async::<i64>(&mut e.redis().connection())
            .await?;
    }
    Ok(())
}

/// D5b: a failed claim is retried under a fresh key.
pub(crate) fn naive_retry_key(
    variant: Variant,
    err: &EngineError,
    request_id: &str,
) -> Option<String> {
    (variant == Variant::D5b && err.outcome_unknown()).then(|| format!("{request_id}-retry"))
}

/// D2 and D3: the broken redemptions.
pub(crate) async fn redeem(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &str,
    order_id: &str,
    order_amount: i64,
) -> Option<EngineResult<Redemption>> {
    match e.config().variant {
        Variant::D2 => Some(redeem_d2(e, coupon_id, user_id, order_id, order_amount).await),
        Variant::D3 => Some(redeem_d3(e, coupon_id, user_id, order_id, order_amount).await),
        _ => None,
    }
}

async fn seed_lock(e: &CouponEngine, coupon_id: Uuid) -> EngineResult<()> {
    for _ in 0..100 {
        if e.redis().lock(coupon_id, "1", e.config().lock_ttl).await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(EngineError::Busy)
}

async fn plain_del(e: &CouponEngine, coupon_id: Uuid) -> EngineResult<()> {
    redis::cmd("DEL")
        .arg(coupon_lock(e.redis().namespace(), coupon_id))
        .query_async::<i64>(&mut e.redis().connection())
        .await?;
    Ok(())
}

async fn discount_of(e: &CouponEngine, coupon_id: Uuid, order_amount: i64) -> EngineResult<i64> {
    let c = e
        .coupon(coupon_id)
        .await?
        .ok_or(EngineError::NotFound("coupon"))?;
    let t = e.template(c.template_id).await?;
    t.spec.discount.compute(order_amount)
}

async fn redeem_d2(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &str,
    order_id: &str,
    amount: i64,
) -> EngineResult<Redemption> {
    seed_lock(e, coupon_id).await?;
    let result = async {
        let discount = discount_of(e, coupon_id, amount).await?;
        let mut tx = e.pool().begin().await?;
        // No `AND status = 'issued'`: a used coupon is "redeemed" again.
        let n = sqlx::query(
            "UPDATE user_coupon SET status = 'used', order_id = $3, used_at = now() \
             WHERE id = $1 AND user_id = $2 AND status <> 'revoked' AND now() < valid_until",
        )
        .bind(coupon_id)
        .bind(user_id)
        .bind(order_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n == 0 {
            return Err(EngineError::InvalidState("coupon state is abnormal".into()));
        }
        sqlx::query(
            "INSERT INTO coupon_use_log (coupon_id, order_id, user_id, order_amount, discount, used_at) \
             VALUES ($1, $2, $3, $4, $5, now()) ON CONFLICT DO NOTHING",
        )
        .bind(coupon_id)
        .bind(order_id)
        .bind(user_id)
        .bind(amount)
        .bind(discount)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Redemption { coupon_id, order_id: order_id.to_owned(), discount, replay: false })
    }
    .await;
    plain_del(e, coupon_id).await?;
    result
}

async fn redeem_d3(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &str,
    order_id: &str,
    amount: i64,
) -> EngineResult<Redemption> {
    seed_lock(e, coupon_id).await?;
    let discount = discount_of(e, coupon_id, amount).await?;
    // Autocommit UPDATE: nothing rolls it back if the log insert fails.
    let n = sqlx::query(
        "UPDATE user_coupon SET status = 'used', order_id = $3, used_at = now() \
         WHERE id = $1 AND user_id = $2 AND status = 'issued' AND now() < valid_until",
    )
    .bind(coupon_id)
    .bind(user_id)
    .bind(order_id)
    .execute(e.pool())
    .await?
    .rows_affected();
    if n == 0 {
        // Early return: the lock leaks until its TTL.
        return Err(EngineError::InvalidState(
            "coupon state is abnormal or used".into(),
        ));
    }
    e.failpoints()
        .hit(crate::failpoint::Failpoint::RedeemAfterUpdate)
        .await?;
    sqlx::query(
        "INSERT INTO coupon_use_log (coupon_id, order_id, user_id, order_amount, discount, used_at) \
         VALUES ($1, $2, $3, $4, $5, now())",
    )
    .bind(coupon_id)
    .bind(order_id)
    .bind(user_id)
    .bind(amount)
    .bind(discount)
    .execute(e.pool())
    .await?;
    plain_del(e, coupon_id).await?;
    Ok(Redemption {
        coupon_id,
        order_id: order_id.to_owned(),
        discount,
        replay: false,
    })
}

/// D4: the seed's refund: the coupon goes back to the user AND its stock is returned.
pub(crate) async fn refund(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &str,
    order_id: &str,
) -> Option<EngineResult<RefundReceipt>> {
    if e.config().variant != Variant::D4 {
        return None;
    }
    Some(refund_both(e, coupon_id, user_id, order_id).await)
}

async fn refund_both(
    e: &CouponEngine,
    coupon_id: Uuid,
    user_id: &str,
    order_id: &str,
) -> EngineResult<RefundReceipt> {
    let row = sqlx::query(
        "UPDATE user_coupon SET status = 'issued', order_id = NULL, used_at = NULL \
         WHERE id = $1 AND status = 'used' AND user_id = $2 AND order_id = $3 RETURNING template_id",
    )
    .bind(coupon_id)
    .bind(user_id)
    .bind(order_id)
    .fetch_optional(e.pool())
    .await?
    .ok_or_else(|| EngineError::InvalidState("coupon state is abnormal; cannot refund".into()))?;
    let template_id: Uuid = row.try_get("template_id")?;
    sqlx::query("UPDATE coupon_use_log SET undone = true, undone_at = now() WHERE coupon_id = $1 AND order_id = $2 AND NOT undone")
        .bind(coupon_id)
        .bind(order_id)
        .execute(e.pool())
        .await?;
    let t = e.template(template_id).await?;
    if t.spec.refund_policy == RefundPolicy::ReturnToStock {
        // Both stores get the stock back, while the coupon stays live.
        postgres::return_to_stock(&mut *e.pool().acquire().await?, template_id).await?;
        redis::cmd("INCR")
            .arg(e.redis().keys(template_id).stock)
            .query_async::<i64>(&mut e.redis().connection())
            .await?;
    }
    Ok(RefundReceipt {
        coupon_id,
        status: CouponStatus::Issued,
        replay: false,
    })
}

/// D6 and D6b: the broken rebuilds.
pub(crate) async fn rebuild(e: &CouponEngine, template_id: Uuid) -> Option<EngineResult<Rebuilt>> {
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
    template_id: Uuid,
    epoch: i64,
) -> EngineResult<()> {
    let window = e.config().idempotency_ttl.as_millis() as i64;
    let recent = postgres::recent_claims(conn, template_id, window).await?;
    let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    e.redis()
        .restore_requests(template_id, &recent, epoch, 0, now_ms)
        .await?;
    Ok(())
}

async fn rebuild_from_total(e: &CouponEngine, template_id: Uuid) -> EngineResult<Rebuilt> {
    let t = e.template(template_id).await?;
    let mut conn = e.pool().acquire().await?;
    let epoch = postgres::epoch(&mut conn, template_id).await?;
    remember_requests(e, &mut conn, template_id, epoch).await?;
    e.redis()
        .rebuild(template_id, t.spec.total_stock, epoch, &[])
        .await?;
    Ok(Rebuilt::Epoch(epoch))
}

async fn rebuild_unfenced(e: &CouponEngine, template_id: Uuid) -> EngineResult<Rebuilt> {
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
