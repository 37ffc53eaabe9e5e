//! Single commands, each atomic alone, for the defect mutants only (feature `mutants`). The
//! engine runs one script where a mutant composes these (D1's defect is the composition), and
//! keeps guards these skip (D2's and D3's unlock without a token, D4's stock return outside
//! the outbox, D5's intent dropped before it is persisted). Here, beside the scripts, so the
//! keys and the record formats are the engine's own.

use redis::RedisResult;
use uuid::Uuid;

use super::{PendingIntent, RedisStore, RequestRecord};
use crate::{
    domain::ids::{RequestId, TemplateId, UserId},
    store::keys::coupon_lock,
};

impl RedisStore {
    /// The template's epoch, None if absent.
    pub async fn epoch(&self, template: TemplateId) -> RedisResult<Option<i64>> {
        redis::cmd("GET")
            .arg(self.keys(template).epoch)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// The stored outcome of a claim request, undecoded (see [`RequestRecord::decode`]).
    pub async fn request_record(
        &self,
        template: TemplateId,
        request_id: &RequestId,
    ) -> RedisResult<Option<String>> {
        redis::cmd("HGET")
            .arg(self.keys(template).outcomes)
            .arg(request_id.as_str())
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Stores the outcome of a claim request for `ttl_secs` at least (one at least).
    pub async fn record_request(
        &self,
        template: TemplateId,
        request_id: &RequestId,
        record: &RequestRecord<'_>,
        ttl_secs: u64,
    ) -> RedisResult<()> {
        let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        self.scripts
            .remember
            .key(self.keys(template).outcomes)
            .arg(now_ms)
            .arg(ttl_secs.max(1) * 1000)
            .arg(request_id.as_str())
            .arg(record.encode())
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Drops the stored outcome of a claim request, whoever's it is (the harness's stand-in
    /// for a record Redis lost).
    pub async fn drop_request_record(
        &self,
        template: TemplateId,
        request_id: &str,
    ) -> RedisResult<i64> {
        redis::cmd("HDEL")
            .arg(self.keys(template).outcomes)
            .arg(request_id)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// True while the request's intent waits in the pending hash.
    pub async fn is_pending(
        &self,
        template: TemplateId,
        request_id: &RequestId,
    ) -> RedisResult<bool> {
        redis::cmd("HEXISTS")
            .arg(self.keys(template).pending)
            .arg(request_id.as_str())
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Adds an intent to the pending hash.
    pub async fn put_pending(&self, intent: &PendingIntent) -> RedisResult<()> {
        redis::cmd("HSET")
            .arg(self.keys(intent.template_id).pending)
            .arg(intent.request_id.as_str())
            .arg(intent.encode())
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Removes the request's intent from the pending hash, whoever's it is.
    pub async fn drop_pending(
        &self,
        template: TemplateId,
        request_id: &RequestId,
    ) -> RedisResult<()> {
        redis::cmd("HDEL")
            .arg(self.keys(template).pending)
            .arg(request_id.as_str())
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Coupons `user_id` holds against the limit, None if the user has none recorded.
    pub async fn claimed_by(
        &self,
        template: TemplateId,
        user_id: &UserId,
    ) -> RedisResult<Option<i64>> {
        redis::cmd("HGET")
            .arg(self.keys(template).claimed)
            .arg(user_id.as_str())
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Counts one more coupon against `user_id`'s limit.
    pub async fn add_claimed(&self, template: TemplateId, user_id: &UserId) -> RedisResult<()> {
        redis::cmd("HINCRBY")
            .arg(self.keys(template).claimed)
            .arg(user_id.as_str())
            .arg(1)
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Takes one from the stock, whatever it holds; returns what is left.
    pub async fn take_stock(&self, template: TemplateId) -> RedisResult<i64> {
        redis::cmd("DECR")
            .arg(self.keys(template).stock)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Gives one back to the stock, outside any outbox or epoch.
    pub async fn give_stock(&self, template: TemplateId) -> RedisResult<()> {
        redis::cmd("INCR")
            .arg(self.keys(template).stock)
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Deletes the redeem lock of `coupon`, whoever holds it.
    pub async fn force_unlock(&self, coupon: Uuid) -> RedisResult<()> {
        redis::cmd("DEL")
            .arg(coupon_lock(&self.namespace, coupon))
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }
}
