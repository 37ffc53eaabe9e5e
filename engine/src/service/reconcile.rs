//! The reconciler (docs/ARCHITECTURE.md, "Reconcile and background work"): persists stale
//! pending intents, applies the outbox, and reports drift between Redis and Postgres.

use std::{collections::HashMap, time::Duration};

use futures::{StreamExt, stream};
use serde::Serialize;
use uuid::Uuid;

use super::CouponEngine;
use crate::{
    Persistence,
    domain::ids::TemplateId,
    error::EngineResult,
    service::rebuild::Trigger,
    store::{arbiter::Ruling, postgres, redis::PendingIntent},
};

/// What a reconcile pass considers.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileOptions {
    /// Only intents at least this old are persisted (younger ones belong to live requests).
    pub min_pending_age: Duration,
}

/// What a reconcile pass did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReconcileReport {
    /// Templates looked at.
    pub templates: usize,
    /// Pending intents written to Postgres (or found already written).
    pub pending_persisted: usize,
    /// Pending intents dropped: fenced by a rebuild, or duplicates given back.
    pub pending_dropped: usize,
    /// Outbox rows applied to Redis.
    pub outbox_applied: usize,
    /// Templates whose Redis stock disagrees with Postgres after the pass.
    pub drift: Vec<TemplateDrift>,
}

/// A disagreement between Redis stock and what Postgres implies.
#[derive(Debug, Clone, Serialize)]
pub struct TemplateDrift {
    /// The template.
    pub template_id: TemplateId,
    /// Stock in Redis (None: not initialised).
    pub redis_stock: Option<i64>,
    /// What Postgres says it must be: total − the counter − intents in flight − refunds to
    /// stock not yet applied.
    pub expected_stock: i64,
}

impl CouponEngine {
    /// Reconciles every template, leaving intents younger than the configured staleness.
    pub async fn reconcile(&self) -> EngineResult<ReconcileReport> {
        self.reconcile_with(ReconcileOptions {
            min_pending_age: self.inner.config.stale_pending_after,
        })
        .await
    }

    /// Reconciles every live template (see [`postgres::live_template_ids`]) with explicit
    /// options, after making sure Redis is the one its state was built against.
    ///
    /// Templates are independent, so several are reconciled at once: one after another, a
    /// sweep costs a few milliseconds of round trips per live template and a server with
    /// hundreds of them would spend seconds in each pass. At most a quarter of the pool's
    /// connections go to it, so claims keep theirs. Every template started is finished
    /// (none is dropped halfway when another fails); the first error is returned after.
    pub async fn reconcile_with(&self, opts: ReconcileOptions) -> EngineResult<ReconcileReport> {
        self.check_redis_identity().await?;
        let ids = postgres::live_template_ids(&self.inner.pg).await?;
        let outcomes: Vec<EngineResult<ReconcileReport>> = stream::iter(ids)
            .map(|id| self.reconcile_template(id, opts))
            .buffer_unordered(self.reconcile_lanes())
            .collect()
            .await;
        let mut report = ReconcileReport::default();
        for outcome in outcomes {
            report.absorb(outcome?);
        }
        // Finished in any order; reported in one, so two passes over the same state compare.
        report.drift.sort_by_key(|d| d.template_id);
        Ok(report)
    }

    fn reconcile_lanes(&self) -> usize {
        (self.inner.pg.options().get_max_connections() / 4).clamp(1, 8) as usize
    }

    async fn reconcile_template(
        &self,
        template_id: TemplateId,
        opts: ReconcileOptions,
    ) -> EngineResult<ReconcileReport> {
        let mut report = ReconcileReport {
            templates: 1,
            ..ReconcileReport::default()
        };
        let template = self.template(template_id).await?;
        // A key lost or evicted while no claim came to notice it.
        if self
            .inner
            .redis
            .complete_epoch(template_id)
            .await?
            .is_none()
        {
            self.resync(template_id, Trigger::Missing).await?;
        }
        let (_, pending) = self.inner.redis.stock_and_pending(template_id).await?;
        let now_ms = (Self::now().unix_timestamp_nanos() / 1_000_000) as i64;
        let min_age = opts.min_pending_age.as_millis() as i64;
        let stale: Vec<PendingIntent> = pending
            .into_iter()
            .filter(|i| now_ms - i.claimed_at_ms >= min_age)
            .collect();
        if !stale.is_empty() {
            let verdicts = self.decide_intents(&template, &stale).await?;
            let mut done = Vec::new();
            let mut disagrees = None;
            for (intent, verdict) in stale.iter().zip(&verdicts) {
                match verdict {
                    Ruling::Stored => {
                        report.pending_persisted += 1;
                        done.push((&intent.request_id, intent.coupon_id));
                    }
                    // Window verdicts come only from the group commit; no row either way.
                    Ruling::Duplicate { .. } | Ruling::WindowNotOpen | Ruling::WindowClosed => {
                        self.inner.redis.release_intent(intent).await?;
                        report.pending_dropped += 1;
                    }
                    Ruling::Fenced
                    | Ruling::EpochAhead
                    | Ruling::StockEmpty
                    | Ruling::UserLimit => {
                        report.pending_dropped += 1;
                        done.push((&intent.request_id, intent.coupon_id));
                        if verdict != &Ruling::Fenced {
                            disagrees = Some(intent.epoch);
                        }
                    }
                }
            }
            self.inner.redis.remove_pending(template_id, &done).await?;
            // An async claim is answered "granted" as soon as Redis admits it, so each stale
            // intent not stored is counted as an acknowledgement lost, once it has left
            // Redis (as the persister counts). Conservatively: an intent whose server
            // stopped between Redis and its answer was never acknowledged, but nothing in
            // Redis tells it apart, and a lost acknowledgement must not go uncounted.
            if self.inner.config.persistence == Persistence::Async {
                for (intent, verdict) in stale.iter().zip(&verdicts) {
                    if verdict != &Ruling::Stored {
                        self.inner
                            .lost_acks
                            .async_refused(template_id, intent, verdict);
                    }
                }
            }
            if let Some(epoch) = disagrees {
                // Redis admitted what Postgres refused (or holds an uncommitted epoch).
                self.resync(template_id, Trigger::Disagrees(epoch)).await?;
            }
        }
        report.outbox_applied += self.relay_outbox(template_id).await?;
        report
            .drift
            .extend(self.drift(template_id, template.spec.total_stock).await?);
        Ok(report)
    }

    /// Redis's stock against what Postgres says it must be: the stock less the counter,
    /// the intents still in flight and the refunds not yet applied. Unlike the full audit
    /// (`audit`, which counts every coupon of the template per user and scans its
    /// use-log), this reads the counter row and what is in flight, so a pass over a large
    /// sale costs what changed since the last. Redis is read first, so an intent pending
    /// then and stored before the Postgres read is counted once. The two reads are not one
    /// snapshot: under load, a claim admitted between them, or a refund another server
    /// applies, can show as a drift of one that the next pass no longer sees (the
    /// audit, read the same way, can too); at quiescence the figure is exact.
    async fn drift(
        &self,
        template_id: TemplateId,
        total_stock: i64,
    ) -> EngineResult<Option<TemplateDrift>> {
        let (redis_stock, pending) = self.inner.redis.stock_and_pending(template_id).await?;
        let ids: Vec<Uuid> = pending.iter().map(|p| p.coupon_id).collect();
        let (counter, unapplied, stored) =
            postgres::stock_ledger(&self.inner.pg, template_id, &ids).await?;
        let in_flight = ids.iter().filter(|id| !stored.contains(id)).count() as i64;
        let expected = total_stock - counter.unwrap_or(0) - in_flight - unapplied;
        Ok((redis_stock != Some(expected)).then_some(TemplateDrift {
            template_id,
            redis_stock,
            expected_stock: expected,
        }))
    }
}

impl ReconcileReport {
    fn absorb(&mut self, other: ReconcileReport) {
        self.templates += other.templates;
        self.pending_persisted += other.pending_persisted;
        self.pending_dropped += other.pending_dropped;
        self.outbox_applied += other.outbox_applied;
        self.drift.extend(other.drift);
    }
}

/// Sums per-user counts of intents (helper for the auditor).
pub(crate) fn pending_per_user(intents: &[&PendingIntent]) -> HashMap<String, i64> {
    let mut m = HashMap::new();
    for i in intents {
        *m.entry(i.user_id.as_str().to_owned()).or_insert(0) += 1;
    }
    m
}
