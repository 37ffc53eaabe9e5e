//! What the scripts answer, and the records they keep: typed replies and their parsers, in
//! one place so that every reader of a reply or a pending intent decodes it the same way.

use redis::{RedisError, RedisResult, Value};
use uuid::Uuid;

/// What the claim script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimScript {
    /// Granted now (`fresh`) or earlier under the same request id.
    Granted(Grant),
    /// No stock left.
    StockEmpty,
    /// The user is at the per-user limit.
    UserLimit,
    /// The template's keys are absent: rebuild from Postgres.
    NotInitialised,
    /// The request id was already used by another user.
    RequestConflict,
}

/// A granted claim as recorded in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The coupon id the claim was given.
    pub coupon_id: Uuid,
    /// Stock left right after this claim.
    pub remaining: i64,
    /// Epoch of the Redis state that granted it.
    pub epoch: i64,
    /// Claim time, ms since the Unix epoch.
    pub claimed_at_ms: i64,
    /// True if granted by this call, false for a replay of an earlier grant.
    pub fresh: bool,
    /// True while the intent still waits to be persisted.
    pub pending: bool,
}

/// A claim intent waiting in the pending hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIntent {
    /// The template claimed from.
    pub template_id: Uuid,
    /// The idempotency key.
    pub request_id: String,
    /// The coupon id to write.
    pub coupon_id: Uuid,
    /// The claimant.
    pub user_id: String,
    /// Epoch of the Redis state that granted it.
    pub epoch: i64,
    /// Claim time, ms since the Unix epoch.
    pub claimed_at_ms: i64,
}

/// What the outbox script did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxApply {
    /// Stock and quota returned now.
    Applied,
    /// Already applied earlier.
    Duplicate,
    /// Redis was rebuilt since the row was read; the rebuild counted it.
    Fenced,
    /// The template's keys are absent; a rebuild will count it.
    NotInitialised,
}

pub(super) fn parse_intent(
    template_id: Uuid,
    request_id: String,
    value: &str,
) -> Option<PendingIntent> {
    let mut parts = value.split('|');
    let coupon_id = parts.next()?.parse().ok()?;
    let user_id = parts.next()?.to_owned();
    let epoch = parts.next()?.parse().ok()?;
    let claimed_at_ms = parts.next()?.parse().ok()?;
    Some(PendingIntent {
        template_id,
        request_id,
        coupon_id,
        user_id,
        epoch,
        claimed_at_ms,
    })
}

fn bad_reply(what: &str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected claim script reply",
        what.to_owned(),
    ))
}

fn text(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

pub(super) fn parse_claim(reply: &[Value]) -> RedisResult<ClaimScript> {
    let tag = reply
        .first()
        .and_then(text)
        .ok_or_else(|| bad_reply("no tag"))?;
    Ok(match tag {
        "ok" => {
            let field = |i: usize| reply.get(i).and_then(int).ok_or_else(|| bad_reply(tag));
            let coupon_id = reply
                .get(1)
                .and_then(text)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad_reply("coupon id"))?;
            ClaimScript::Granted(Grant {
                coupon_id,
                remaining: field(2)?,
                epoch: field(3)?,
                claimed_at_ms: field(4)?,
                fresh: field(5)? == 1,
                pending: field(6)? == 1,
            })
        }
        "stock_empty" => ClaimScript::StockEmpty,
        "user_limit" => ClaimScript::UserLimit,
        "not_initialised" => ClaimScript::NotInitialised,
        "request_conflict" => ClaimScript::RequestConflict,
        other => return Err(bad_reply(other)),
    })
}
