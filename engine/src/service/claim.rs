//! Claim (领券), the hot path: one Redis script admits, then (sync mode) the claim joins its
//! template's group commit and Postgres decides (docs/ARCHITECTURE.md, "Claim").

use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    config::Persistence,
    domain::{
        ids::{RequestId, TemplateId, UserId},
        template::Template,
    },
    error::{EngineError, EngineResult},
    failpoint::Failpoint,
    service::{GateSays, rebuild::Trigger},
    store::{
        arbiter::{self, Ruling},
        redis::{ClaimScript, Grant, PendingIntent},
    },
};

/// Rebuilds or fences one claim may go through before it gives up.
const MAX_SETTLE_ATTEMPTS: usize = 3;

/// How long a claim waits for the Redis connection to come back before its one retry.
const RECONNECT_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// A granted claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimReceipt {
    /// The coupon the user now holds.
    pub coupon_id: Uuid,
    /// The template claimed from.
    pub template_id: TemplateId,
    /// Stock left right after this claim was granted.
    pub remaining_stock: i64,
    /// True when this answers a retry of an earlier successful request.
    pub replay: bool,
}

impl CouponEngine {
    /// Claims one coupon of `template_id` for `user_id`. `request_id` is the idempotency key:
    /// a retry with the same id answers with the same coupon and has no second effect.
    ///
    /// Answers within the engine's deadline ([`crate::EngineConfig::deadline`]); past it,
    /// `unavailable` with the outcome unknown.
    pub async fn claim(
        &self,
        template_id: TemplateId,
        user_id: &UserId,
        request_id: &RequestId,
    ) -> EngineResult<ClaimReceipt> {
        // Boxed: unboxed, the deadline's timer and the nesting took the claim future past
        // the size its test allows (3.3 KB); one allocation a claim is cheaper than copies.
        let claim = async {
            let answer = self.claim_unbounded(template_id, user_id, request_id).await;
            // D5b retries under a fresh key within the same deadline.
            #[cfg(feature = "mutants")]
            if let Some(retry) = crate::service::mutants::retry_key(self, &answer, request_id) {
                return Box::pin(self.claim_unbounded(template_id, user_id, &retry)).await;
            }
            answer
        };
        self.within_deadline(Box::pin(claim)).await
    }

    async fn claim_unbounded(
        &self,
        template_id: TemplateId,
        user_id: &UserId,
        request_id: &RequestId,
    ) -> EngineResult<ClaimReceipt> {
        #[cfg(feature = "mutants")]
        let mutant_key = crate::service::mutants::claim_key(self, request_id);
        #[cfg(feature = "mutants")]
        let request_id = mutant_key.as_ref().unwrap_or(request_id);
        // The rare paths below are boxed (`Box::pin`): inline, their futures would make
        // every claim's future kilobytes larger, and each HTTP layer copies it.
        let template = self.template(template_id).await?;
        if let Err(refusal) = template.check_claimable(Self::now()) {
            return Box::pin(self.replay_outside_window(template_id, request_id, user_id, refusal))
                .await;
        }
        match self.sold_out_says(template_id, request_id) {
            GateSays::Refuse => return Err(EngineError::StockEmpty),
            GateSays::Recheck if Box::pin(self.recheck_sold_out(template_id, request_id)).await => {
                return Err(EngineError::StockEmpty);
            }
            _ => {}
        }
        let limit = template.spec.per_user_limit;
        for _ in 0..MAX_SETTLE_ATTEMPTS {
            let now_ms = (Self::now().unix_timestamp_nanos() / 1_000_000) as i64;
            let grant = match self
                .admit(template_id, request_id, user_id, limit, now_ms)
                .await?
            {
                ClaimScript::Granted(g) => g,
                ClaimScript::StockEmpty => {
                    Box::pin(self.close_sold_out_gate(template_id)).await;
                    return Box::pin(self.recheck_refusal(
                        template_id,
                        request_id,
                        user_id,
                        EngineError::StockEmpty,
                    ))
                    .await;
                }
                ClaimScript::UserLimit => {
                    let refusal = EngineError::UserLimit { limit };
                    return Box::pin(self.recheck_refusal(
                        template_id,
                        request_id,
                        user_id,
                        refusal,
                    ))
                    .await;
                }
                ClaimScript::RequestConflict => {
                    return Err(EngineError::invalid(
                        "request_id was already used by another user",
                    ));
                }
                ClaimScript::NotInitialised => {
                    self.resync(template_id, Trigger::Missing).await?;
                    continue;
                }
                ClaimScript::ScriptNotLoaded => {
                    return Err(EngineError::Unavailable(
                        "redis kept losing the claim script (restarting or failing over)".into(),
                    ));
                }
            };
            let receipt = ClaimReceipt {
                coupon_id: grant.coupon_id,
                template_id,
                remaining_stock: grant.remaining,
                replay: !grant.fresh,
            };
            if self.inner.config.persistence == Persistence::Async {
                if grant.fresh
                    && grant.pending
                    && let Some(p) = &self.inner.persister
                {
                    p.submit(intent(template_id, request_id, user_id, &grant))
                        .await;
                }
                return Ok(receipt);
            }
            let answer = if grant.pending {
                let verdict = self
                    .persist(&template, intent(template_id, request_id, user_id, &grant))
                    .await?;
                self.settle(&template, request_id, user_id, &grant, receipt, verdict)
                    .await?
            } else {
                Box::pin(self.replay_settled(template_id, request_id, user_id, &grant, receipt))
                    .await?
            };
            if let Some(answer) = answer {
                return Ok(answer);
            }
        }
        Err(EngineError::Unavailable(
            "the claim could not settle while the template was being rebuilt".into(),
        ))
    }

    /// A claim refused by the window or the template's state may be the retry of one
    /// granted before (the client lost the answer): it gets its coupon, as any retry does.
    /// Only refused claims pay this lookup.
    async fn replay_outside_window(
        &self,
        template_id: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        refusal: EngineError,
    ) -> EngineResult<ClaimReceipt> {
        let stored =
            arbiter::durable_claim_by_request(&self.inner.pg, template_id, request_id).await?;
        let Some((coupon_id, owner)) = stored else {
            return Err(refusal);
        };
        let remaining_stock = self
            .remaining_stock(template_id)
            .await
            .ok()
            .flatten()
            .unwrap_or(0);
        let receipt = ClaimReceipt {
            coupon_id,
            template_id,
            remaining_stock,
            replay: true,
        };
        replay_of(receipt, coupon_id, &owner, user_id)
    }

    /// The claim script's decision, from a server whose identity was checked: a server new
    /// to the engine answers NOSCRIPT, and is checked (and rebuilt if it changed) before the
    /// script is loaded and run (`identity.rs`).
    async fn admit(
        &self,
        template_id: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        limit: i32,
        now_ms: i64,
    ) -> EngineResult<ClaimScript> {
        #[cfg(feature = "mutants")]
        if let Some(r) = Box::pin(crate::service::mutants::admit(
            self,
            template_id,
            request_id,
            user_id,
            limit,
            now_ms,
        ))
        .await
        {
            return r;
        }
        let ttl_secs = self.inner.config.idempotency_ttl.as_secs();
        let admit = || {
            self.inner.redis.claim(
                template_id,
                request_id,
                user_id,
                limit,
                Uuid::now_v7(),
                now_ms,
                ttl_secs,
            )
        };
        for _ in 0..MAX_SETTLE_ATTEMPTS {
            // The first call after a Redis restart meets the dropped connection; retrying is
            // safe: if the script did run, its recorded outcome for this request id answers
            // the retry, and if the server is a new one it answers NOSCRIPT.
            let checks_before = self.new_server_checks();
            let decision = match admit().await {
                Err(e) if e.is_io_error() || e.is_connection_dropped() => {
                    self.inner.redis_suspect.note_error(&e);
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    admit()
                        .await
                        .inspect_err(|e| self.inner.redis_suspect.note_error(e))?
                }
                other => other.inspect_err(|e| self.inner.redis_suspect.note_error(e))?,
            };
            if decision != ClaimScript::ScriptNotLoaded {
                return Ok(decision);
            }
            Box::pin(self.check_new_server(checks_before)).await?;
        }
        Ok(ClaimScript::ScriptNotLoaded)
    }

    /// Sync mode: has Postgres decide a grant Redis admitted (through the group commit).
    async fn persist(
        &self,
        template: &Arc<Template>,
        intent: PendingIntent,
    ) -> EngineResult<Ruling> {
        #[cfg(feature = "mutants")]
        Box::pin(crate::service::mutants::before_persist(self, &intent)).await?;
        self.inner
            .failpoints
            .hit(Failpoint::ClaimAfterRedis)
            .await?;
        self.inner.batcher.decide(template.clone(), intent).await
    }

    /// A replay of a settled grant answers only what Postgres holds: the grant may have been
    /// refused, fenced or dropped by the reconciler since. None: admit it again.
    async fn replay_settled(
        &self,
        template_id: TemplateId,
        request_id: &RequestId,
        user_id: &UserId,
        grant: &Grant,
        receipt: ClaimReceipt,
    ) -> EngineResult<Option<ClaimReceipt>> {
        let stored =
            arbiter::durable_claim_by_request(&self.inner.pg, template_id, request_id).await?;
        match stored {
            Some((coupon_id, owner)) => replay_of(receipt, coupon_id, &owner, user_id).map(Some),
            None => {
                // Redis settles a grant only once its batch committed, so a settled grant
                // with no row is one Postgres lost after acknowledging it (a failover to a
                // standby that lacked the commit) or dropped since (a reconciler, a fence).
                self.inner.lost_acks.settled_missing();
                tracing::warn!(%template_id, %request_id, coupon_id = %grant.coupon_id,
                    "a retried claim redis holds as granted has no row in postgres: an \
                     acknowledged claim was lost (postgres failed over?); admitting it again");
                self.inner
                    .redis
                    .forget_request(template_id, request_id, grant.coupon_id)
                    .await?;
                Ok(None)
            }
        }
    }

    /// Answers a claim by Postgres's verdict on its grant; None: admit it again.
    async fn settle(
        &self,
        template: &Template,
        request_id: &RequestId,
        user_id: &UserId,
        grant: &Grant,
        receipt: ClaimReceipt,
        verdict: Ruling,
    ) -> EngineResult<Option<ClaimReceipt>> {
        let template_id = template.id;
        match verdict {
            Ruling::Stored => {
                self.inner
                    .failpoints
                    .hit(Failpoint::ClaimAfterPersist)
                    .await?;
                // The batch takes its stored intents out of the pending set.
                Ok(Some(receipt))
            }
            Ruling::Duplicate {
                coupon_id,
                user_id: owner,
            } => {
                // Past the idempotency window the unique constraint is the backstop:
                // give the Redis deduction back and answer with the stored coupon.
                self.inner
                    .redis
                    .release(
                        template_id,
                        request_id,
                        user_id,
                        grant.epoch,
                        grant.coupon_id,
                    )
                    .await?;
                replay_of(receipt, coupon_id, &owner, user_id).map(Some)
            }
            Ruling::StockEmpty | Ruling::UserLimit => {
                // Redis admitted what Postgres refused: Redis is stale (an old snapshot,
                // a lagging replica, an evicted key). The refusal stands; Redis is
                // rebuilt from Postgres before it admits again.
                self.inner.stale_admissions.note(template_id, &verdict);
                self.resync_after_refusal(template_id, grant.epoch).await;
                Err(match verdict {
                    Ruling::StockEmpty => EngineError::StockEmpty,
                    _ => EngineError::UserLimit {
                        limit: template.spec.per_user_limit,
                    },
                })
            }
            Ruling::WindowNotOpen | Ruling::WindowClosed => {
                // This server's clock let it admit outside the window that Postgres's clock
                // sees (docs/ARCHITECTURE.md, "One clock"): nothing was stored; the Redis
                // deduction is given back and the claim refused as any outside it is.
                self.inner
                    .redis
                    .release(
                        template_id,
                        request_id,
                        user_id,
                        grant.epoch,
                        grant.coupon_id,
                    )
                    .await?;
                tracing::warn!(%template_id, ?verdict,
                    "admitted by this server's clock outside the claim window Postgres's clock sees; is this server's clock skewed?");
                Err(EngineError::InvalidState(
                    if verdict == Ruling::WindowNotOpen {
                        "the claim window has not opened"
                    } else {
                        "the claim window has closed"
                    }
                    .into(),
                ))
            }
            Ruling::EpochAhead => {
                // Redis holds a rebuild that never committed: rebuild it again.
                tracing::warn!(%template_id, "redis epoch ahead of postgres; rebuilding");
                self.resync(template_id, Trigger::Disagrees(grant.epoch))
                    .await?;
                Ok(None)
            }
            Ruling::Fenced => {
                // A rebuild counted without this claim: it fails, unacknowledged. Not
                // retried here: others may have seen its reservation of the request
                // id, so only the client's retry may reuse it. A Redis still at the
                // old epoch (restored from before the rebuild) is rebuilt first.
                self.inner
                    .redis
                    .forget_request(template_id, request_id, grant.coupon_id)
                    .await?;
                self.resync(template_id, Trigger::Disagrees(grant.epoch))
                    .await?;
                Err(EngineError::Unavailable(
                    "the claim was fenced by a rebuild of the template's Redis state; \
                     retry with the same request_id"
                        .into(),
                ))
            }
        }
    }

    /// After Postgres refused what Redis admitted. The claim's answer does not depend on
    /// this repair, so a failure is logged, not returned.
    async fn resync_after_refusal(&self, template_id: TemplateId, epoch: i64) {
        if let Err(e) = self.resync(template_id, Trigger::Disagrees(epoch)).await {
            tracing::warn!(error = %e, %template_id, "rebuild after a refusal failed; the reconciler retries");
        }
    }
}

/// The answer for a request id Postgres already holds.
pub(super) fn replay_of(
    receipt: ClaimReceipt,
    coupon_id: Uuid,
    owner: &str,
    user_id: &UserId,
) -> EngineResult<ClaimReceipt> {
    if owner != user_id.as_str() {
        return Err(EngineError::invalid(
            "request_id was already used by another user",
        ));
    }
    Ok(ClaimReceipt {
        coupon_id,
        replay: coupon_id != receipt.coupon_id || receipt.replay,
        ..receipt
    })
}

fn intent(
    template_id: TemplateId,
    request_id: &RequestId,
    user_id: &UserId,
    g: &Grant,
) -> PendingIntent {
    PendingIntent {
        template_id,
        request_id: request_id.clone(),
        coupon_id: g.coupon_id,
        user_id: user_id.clone(),
        epoch: g.epoch,
        claimed_at_ms: g.claimed_at_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_of_output<A, B, C, D, R, F: Fn(A, B, C, D) -> R>(_: F) -> usize {
        std::mem::size_of::<R>()
    }

    async fn claim_call(e: CouponEngine, t: TemplateId, u: UserId, r: RequestId) {
        let _ = e.claim(t, &u, &r).await;
    }

    /// Every HTTP layer moves a request's future (axum boxes it, tower wraps it), so its size
    /// is copied several times per claim; the rare paths (rebuilds, disagreements, mutants)
    /// are boxed to keep it small. It was 10 KB before they were (~12% of the server's CPU
    /// went to those copies under the bench).
    #[test]
    fn the_claim_future_stays_small() {
        let size = size_of_output(claim_call);
        assert!(size <= 2048, "the claim future is {size} bytes");
    }
}
