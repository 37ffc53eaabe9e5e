//! Redis side of the engine: the Lua scripts and the few plain commands around them.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use redis::{ErrorKind, FromRedisValue, Pipeline, RedisResult, Script, ServerErrorKind, Value};
use uuid::Uuid;

use crate::domain::ids::{RequestId, TemplateId, UserId};

use super::{
    keys::{TemplateKeys, coupon_lock},
    redis_conn::{RedisConn, RedisTarget, delete_matching},
};

mod rebuild;
mod replies;
#[cfg(feature = "mutants")]
mod unscripted;

pub use rebuild::{Published, SLICE};
use replies::parse_claim;
pub use replies::{ClaimScript, Grant, OutboxApply, PendingIntent, RequestRecord};

/// The field that marks a `claimed` hash as built by a rebuild (never a valid user id).
pub const CLAIMED_BUILT: &str = "";

/// Source of the claim script (public so benchmarks run exactly what the engine runs).
pub const CLAIM_SCRIPT: &str = concat!(
    include_str!("../../lua/outcomes.lua"),
    include_str!("../../lua/claim.lua")
);

/// A script that reads or writes the recorded outcomes, with their helpers prepended.
macro_rules! with_outcomes {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("../../lua/outcomes.lua"),
            include_str!($file)
        ))
    };
}

/// The engine's scripts, run with EVALSHA. The others are loaded when NOSCRIPT answers them;
/// the claim script only after the server was checked (`RedisStore::claim`).
struct Scripts {
    /// The claim script of this generation (`RedisStore::renew_claim_script`).
    claim: RwLock<Arc<Script>>,
    release: Script,
    unlock: Script,
    outbox_apply: Script,
    rebuild_fence: Script,
    rebuild_publish: Script,
    unpend: Script,
    forget: Script,
    remember: Script,
}

impl Scripts {
    fn load(namespace: &str) -> Self {
        Self {
            claim: RwLock::new(Arc::new(claim_script(namespace))),
            release: Script::new(include_str!("../../lua/release.lua")),
            unlock: Script::new(include_str!("../../lua/unlock.lua")),
            outbox_apply: Script::new(include_str!("../../lua/outbox_apply.lua")),
            rebuild_fence: Script::new(include_str!("../../lua/rebuild_fence.lua")),
            rebuild_publish: Script::new(include_str!("../../lua/rebuild_publish.lua")),
            unpend: Script::new(include_str!("../../lua/unpend.lua")),
            forget: Script::new(include_str!("../../lua/forget.lua")),
            remember: with_outcomes!("../../lua/remember.lua"),
        }
    }

    fn claim(&self) -> Arc<Script> {
        self.claim
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The claim script under a hash no server holds yet. Its NOSCRIPT is the sign that has a
/// server checked (`service/identity.rs`), and that sign must be one only a checked server
/// lacks: a hash of its own per namespace (with one shared hash, the first namespace checked
/// after a restart would load it for every other), and a new one whenever a check finds
/// another Redis (a former master promoted again still holds the hash it was given before
/// it was demoted).
fn claim_script(namespace: &str) -> Script {
    let generation = Uuid::now_v7();
    Script::new(&format!(
        "-- namespace {namespace:?}, generation {generation}\n{CLAIM_SCRIPT}"
    ))
}

/// Redis state of one template, for the auditor and the reconciler.
#[derive(Debug, Clone, Default)]
pub struct RedisSnapshot {
    /// Remaining stock, None if not initialised.
    pub stock: Option<i64>,
    /// Current epoch, None if not initialised.
    pub epoch: Option<i64>,
    /// Claimed counts per user.
    pub claimed: HashMap<String, i64>,
    /// Intents not yet persisted.
    pub pending: Vec<PendingIntent>,
}

/// The intents of a `pending` hash (request id → encoded intent); an entry that does not
/// decode is left out.
fn decode_pending(template: TemplateId, hash: HashMap<String, String>) -> Vec<PendingIntent> {
    hash.into_iter()
        .filter_map(|(rid, v)| PendingIntent::decode(template, rid, &v))
        .collect()
}

/// Raw reply of the snapshot pipeline: stock, epoch, claimed hash, pending hash.
type SnapshotReply = (
    Option<i64>,
    Option<i64>,
    HashMap<String, i64>,
    HashMap<String, String>,
);

/// The Redis store: one multiplexed connection (to a node or a cluster), cheap to clone.
#[derive(Clone)]
pub struct RedisStore {
    conn: RedisConn,
    namespace: Arc<str>,
    scripts: Arc<Scripts>,
    /// D18's defect (see [`RedisStore::naming_request_keys`]).
    #[cfg(feature = "mutants")]
    names_request_keys: bool,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the Redis at `url`; every key is prefixed with `namespace`.
    pub async fn connect(url: &str, namespace: &str) -> RedisResult<Self> {
        Self::connect_to(&RedisTarget::Node(url.to_owned()), namespace).await
    }

    /// Connects to `target` (one node or a cluster); every key is prefixed with `namespace`.
    pub async fn connect_to(target: &RedisTarget, namespace: &str) -> RedisResult<Self> {
        Ok(Self {
            conn: RedisConn::open(target).await?,
            namespace: namespace.into(),
            scripts: Arc::new(Scripts::load(namespace)),
            #[cfg(feature = "mutants")]
            names_request_keys: false,
        })
    }

    /// True when connected to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.conn, RedisConn::Cluster(..))
    }

    /// The namespace of this store's keys.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The keys of `template`.
    pub fn keys(&self, template: TemplateId) -> TemplateKeys {
        TemplateKeys::new(&self.namespace, template)
    }

    /// A connection for commands outside the engine's own (admin, tests).
    pub fn connection(&self) -> RedisConn {
        self.conn.clone()
    }

    /// Round trip to Redis.
    pub async fn ping(&self) -> RedisResult<()> {
        redis::cmd("PING")
            .query_async::<String>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Runs the claim script (one round trip, also for refusals).
    #[allow(clippy::too_many_arguments)]
    pub async fn claim(
        &self,
        template: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        limit: i32,
        coupon_id: Uuid,
        now_ms: i64,
        req_ttl_secs: u64,
    ) -> RedisResult<ClaimScript> {
        let k = self.keys(template);
        let mut id = Uuid::encode_buffer();
        let coupon = coupon_id.hyphenated().encode_lower(&mut id);
        // EVALSHA by hand, not `Script::invoke_async`: that would load the script on NOSCRIPT
        // and run it at once, and NOSCRIPT is the one sign, before anything is admitted, that
        // this server is new to the engine (see `ClaimScript::ScriptNotLoaded`).
        let script = self.scripts.claim();
        #[cfg(feature = "mutants")]
        let own_key = self
            .names_request_keys
            .then(|| k.request_key(request_id.as_str()));
        #[cfg(not(feature = "mutants"))]
        let own_key: Option<String> = None;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash())
            .arg(5 + usize::from(own_key.is_some()))
            .arg(&k.stock)
            .arg(&k.claimed)
            .arg(&k.outcomes)
            .arg(&k.pending)
            .arg(&k.epoch)
            .arg(own_key)
            .arg(request_id.as_str())
            .arg(user_id.as_str())
            .arg(limit)
            .arg(&*coupon)
            .arg(now_ms)
            .arg(req_ttl_secs.max(1));
        match cmd.query_async::<Vec<Value>>(&mut self.conn.clone()).await {
            Ok(reply) => parse_claim(&reply),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                Ok(ClaimScript::ScriptNotLoaded)
            }
            Err(e) => Err(e),
        }
    }

    /// D18: this store's claims also name a key of the request's own, which the script never
    /// touches but a cluster node checks like the others (round two's key layout).
    #[cfg(feature = "mutants")]
    #[must_use]
    pub fn naming_request_keys(mut self) -> Self {
        self.names_request_keys = true;
        self
    }

    /// Empties the script cache (every node of a cluster).
    pub async fn flush_scripts(&self) -> RedisResult<()> {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Loads every script of this namespace's engine into Redis (each master of a cluster,
    /// no replica).
    pub async fn load_scripts(&self) -> RedisResult<()> {
        self.load_scripts_into(&mut self.conn.clone()).await
    }

    /// Loads the scripts [`Self::load_scripts`] loads, of this generation, into the server at
    /// `url` (the test harness's stand-in for a server that gives no sign of being new).
    pub async fn load_scripts_on(&self, url: &str) -> RedisResult<()> {
        let mut conn = RedisConn::open(&RedisTarget::Node(url.to_owned())).await?;
        self.load_scripts_into(&mut conn).await
    }

    async fn load_scripts_into(&self, conn: &mut RedisConn) -> RedisResult<()> {
        let s = &self.scripts;
        let claim = s.claim();
        conn.load_on_masters(&[
            &claim,
            &s.release,
            &s.unlock,
            &s.outbox_apply,
            &s.rebuild_fence,
            &s.rebuild_publish,
            &s.unpend,
            &s.forget,
            &s.remember,
        ])
        .await
    }

    /// Gives the claim script a hash no server holds: every server, this one included,
    /// answers the next claim with NOSCRIPT and is checked before it admits again.
    pub fn renew_claim_script(&self) {
        *self
            .scripts
            .claim
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Arc::new(claim_script(&self.namespace));
    }

    /// Gives back the stock and quota of a claim that will never be persisted.
    pub async fn release(
        &self,
        template: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        epoch: i64,
        coupon_id: Uuid,
    ) -> RedisResult<bool> {
        let k = self.keys(template);
        let n: i64 = k
            .counters_of(&self.scripts.release)
            .key(&k.outcomes)
            .arg(request_id.as_str())
            .arg(user_id.as_str())
            .arg(epoch)
            .arg(coupon_id.to_string())
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// [`RedisStore::release`] of a pending intent.
    pub async fn release_intent(&self, i: &PendingIntent) -> RedisResult<bool> {
        self.release(
            i.template_id,
            &i.request_id,
            &i.user_id,
            i.epoch,
            i.coupon_id,
        )
        .await
    }

    /// Removes persisted intents `(request_id, coupon_id)` from the pending hash, each only
    /// if the pending intent is still that coupon's.
    pub async fn remove_pending(
        &self,
        template: TemplateId,
        settled: &[(&RequestId, Uuid)],
    ) -> RedisResult<()> {
        if settled.is_empty() {
            return Ok(());
        }
        let pending = self.keys(template).pending;
        let mut inv = self.scripts.unpend.key(&pending);
        for (rid, coupon) in settled {
            inv.arg(rid.as_str()).arg(coupon.to_string());
        }
        inv.invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Forgets the recorded outcome of a claim request if it is still `coupon_id`'s.
    pub async fn forget_request(
        &self,
        template: TemplateId,
        request_id: &RequestId,
        coupon_id: Uuid,
    ) -> RedisResult<()> {
        self.scripts
            .forget
            .key(self.keys(template).outcomes)
            .arg(request_id.as_str())
            .arg(coupon_id.to_string())
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(drop)
    }

    /// Takes the redeem lock of `coupon` with `token` (SET NX PX).
    pub async fn lock(&self, coupon: Uuid, token: &str, ttl: Duration) -> RedisResult<bool> {
        let reply: Option<String> = redis::cmd("SET")
            .arg(coupon_lock(&self.namespace, coupon))
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(reply.is_some())
    }

    /// Releases the redeem lock of `coupon` only if `token` still holds it.
    pub async fn unlock(&self, coupon: Uuid, token: &str) -> RedisResult<bool> {
        let n: i64 = self
            .scripts
            .unlock
            .key(coupon_lock(&self.namespace, coupon))
            .arg(token)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Applies one outbox row (stock and quota back) exactly once within `epoch`.
    pub async fn apply_outbox(
        &self,
        template: TemplateId,
        outbox_id: i64,
        user_id: &UserId,
        epoch: i64,
    ) -> RedisResult<OutboxApply> {
        let k = self.keys(template);
        let reply: String = self
            .scripts
            .outbox_apply
            .key(&k.stock)
            .key(&k.claimed)
            .key(&k.epoch)
            .key(&k.applied)
            .arg(outbox_id)
            .arg(user_id.as_str())
            .arg(epoch)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match reply.as_str() {
            "applied" => OutboxApply::Applied,
            "duplicate" => OutboxApply::Duplicate,
            "fenced" => OutboxApply::Fenced,
            _ => OutboxApply::NotInitialised,
        })
    }

    /// Number of intents in the template's pending hash (not its built mark).
    pub async fn pending_len(&self, template: TemplateId) -> RedisResult<i64> {
        let pending = self.keys(template).pending;
        let (fields, mark): (i64, i64) = self
            .pipe_on(
                &pending,
                redis::pipe()
                    .atomic()
                    .hlen(&pending)
                    .hexists(&pending, CLAIMED_BUILT),
            )
            .await?;
        Ok(fields - mark)
    }

    /// Remaining stock, None if the template is not initialised.
    pub async fn stock(&self, template: TemplateId) -> RedisResult<Option<i64>> {
        redis::cmd("GET")
            .arg(self.keys(template).stock)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// The epoch of the template's Redis state, or None unless the state is complete
    /// (stock, epoch and the built marker of `claimed` all present).
    pub async fn complete_epoch(&self, template: TemplateId) -> RedisResult<Option<i64>> {
        let k = self.keys(template);
        let (stock, epoch, built): (Option<i64>, Option<i64>, bool) = self
            .pipe_on(
                &k.stock,
                redis::pipe()
                    .atomic()
                    .get(&k.stock)
                    .get(&k.epoch)
                    .hexists(&k.claimed, CLAIMED_BUILT),
            )
            .await?;
        Ok(epoch.filter(|_| stock.is_some() && built))
    }

    /// Which Redis this is (see [`RedisConn::identity`]): another answer means a restart or
    /// a failover, and with it possibly stale state.
    pub async fn identity(&self) -> RedisResult<String> {
        self.conn.clone().identity().await
    }

    /// The eviction policy, if the server lets us read it (managed services may not).
    pub async fn maxmemory_policy(&self) -> RedisResult<String> {
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(reply.get(1).cloned().unwrap_or_default())
    }

    /// The stock and the intents in flight of `template`, read together (one MULTI round
    /// trip): what the reconciler needs each pass, without the per-user hash, which grows
    /// with every user the template ever served.
    pub async fn stock_and_pending(
        &self,
        template: TemplateId,
    ) -> RedisResult<(Option<i64>, Vec<PendingIntent>)> {
        let k = self.keys(template);
        let (stock, pending): (Option<i64>, HashMap<String, String>) = self
            .pipe_on(
                &k.stock,
                redis::pipe().atomic().get(&k.stock).hgetall(&k.pending),
            )
            .await?;
        Ok((stock, decode_pending(template, pending)))
    }

    /// Everything Redis holds about `template` (one MULTI round trip).
    pub async fn snapshot(&self, template: TemplateId) -> RedisResult<RedisSnapshot> {
        let k = self.keys(template);
        let (stock, epoch, claimed, pending): SnapshotReply = self
            .pipe_on(
                &k.stock,
                redis::pipe()
                    .atomic()
                    .get(&k.stock)
                    .get(&k.epoch)
                    .hgetall(&k.claimed)
                    .hgetall(&k.pending),
            )
            .await?;
        let pending = decode_pending(template, pending);
        let mut claimed = claimed;
        claimed.remove(CLAIMED_BUILT);
        Ok(RedisSnapshot {
            stock,
            epoch,
            claimed,
            pending,
        })
    }

    /// Runs a pipeline (or MULTI) whose keys share `key`'s slot. The cluster client follows
    /// MOVED for a single command but not inside a pipeline: after a failover the old master
    /// refuses it, so each retry is preceded by one command on `key`, which the client
    /// redirects and rebuilds its slot map from. Only idempotent pipelines come here.
    async fn pipe_on<T: FromRedisValue>(&self, key: &str, pipe: &Pipeline) -> RedisResult<T> {
        let mut conn = self.conn.clone();
        let mut attempt = 0u64;
        loop {
            match pipe.query_async(&mut conn).await {
                Err(e) if self.is_cluster() && attempt < 5 => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "pipeline refused by the cluster; following the slot");
                    let _ = redis::cmd("EXISTS")
                        .arg(key)
                        .query_async::<i64>(&mut conn)
                        .await;
                    tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
                }
                other => return other,
            }
        }
    }

    /// Deletes every key of `template` (as a Redis restart without persistence would).
    /// Used by tests and the nemesis; never FLUSHALL a shared Redis.
    pub async fn drop_template_keys(&self, template: TemplateId) -> RedisResult<usize> {
        delete_matching(&mut self.conn.clone(), &self.keys(template).pattern()).await
    }
}
