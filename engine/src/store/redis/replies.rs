//! What the scripts answer, and the records they keep: typed replies and their parsers, in
//! one place so that every reader of a reply or a pending intent decodes it the same way.

use redis::{RedisError, RedisResult, Value};
use uuid::Uuid;

use crate::domain::ids::{RequestId, TemplateId, UserId};

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
    /// The server does not hold the claim script, so nothing ran: its script cache is empty
    /// because it is new to this engine (restarted, possibly from an older snapshot, or a
    /// promoted replica: Redis 7 does not replicate `SCRIPT LOAD`) or was flushed. Its
    /// identity is checked, and its state rebuilt if it changed, before the script is loaded.
    ScriptNotLoaded,
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
    pub template_id: TemplateId,
    /// The idempotency key.
    pub request_id: RequestId,
    /// The coupon id to write.
    pub coupon_id: Uuid,
    /// The claimant.
    pub user_id: UserId,
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

impl PendingIntent {
    /// The value of this intent in the pending hash (`coupon|user|epoch|at_ms`, field: the
    /// request id), as claim.lua writes it.
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.coupon_id, self.user_id, self.epoch, self.claimed_at_ms
        )
    }

    /// Reads an intent back from its pending-hash field and value.
    pub fn decode(template_id: TemplateId, request_id: String, value: &str) -> Option<Self> {
        let mut parts = value.split('|');
        let coupon_id = parts.next()?.parse().ok()?;
        let user_id = UserId::trusted(parts.next()?.to_owned());
        let epoch = parts.next()?.parse().ok()?;
        let claimed_at_ms = parts.next()?.parse().ok()?;
        Some(Self {
            template_id,
            request_id: RequestId::trusted(request_id),
            coupon_id,
            user_id,
            epoch,
            claimed_at_ms,
        })
    }
}

/// The recorded outcome of one claim request (its `req:` key): the one Rust encoder and
/// decoder of `coupon|user|remaining|epoch|at_ms`. claim.lua writes and reads the same
/// format, and release.lua and forget.lua match its leading coupon id; a change here is a
/// change there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRecord<'a> {
    /// The coupon granted.
    pub coupon_id: Uuid,
    /// The claimant.
    pub user_id: &'a str,
    /// Stock left right after the grant.
    pub remaining: i64,
    /// Epoch of the Redis state that granted it.
    pub epoch: i64,
    /// Grant time, ms since the Unix epoch.
    pub at_ms: i64,
}

impl<'a> RequestRecord<'a> {
    /// The stored value.
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.coupon_id, self.user_id, self.remaining, self.epoch, self.at_ms
        )
    }

    /// Reads a stored value: exactly five fields, each well formed, or None.
    pub fn decode(value: &'a str) -> Option<Self> {
        let mut parts = value.split('|');
        let record = Self {
            coupon_id: parts.next()?.parse().ok()?,
            user_id: parts.next()?,
            remaining: parts.next()?.parse().ok()?,
            epoch: parts.next()?.parse().ok()?,
            at_ms: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(record)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = RequestRecord {
            coupon_id: Uuid::from_u128(7),
            user_id: "u-1",
            remaining: -1,
            epoch: 3,
            at_ms: 1_767_225_600_000,
        };
        assert_eq!(RequestRecord::decode(&r.encode()), Some(r));
        assert_eq!(RequestRecord::decode("a|b|c|d"), None);
        let i = PendingIntent {
            template_id: Uuid::nil().into(),
            request_id: RequestId::parse("r").expect("valid"),
            coupon_id: Uuid::from_u128(9),
            user_id: UserId::parse("u").expect("valid"),
            epoch: 2,
            claimed_at_ms: 5,
        };
        assert_eq!(
            PendingIntent::decode(Uuid::nil().into(), "r".into(), &i.encode()),
            Some(i)
        );
    }
}
