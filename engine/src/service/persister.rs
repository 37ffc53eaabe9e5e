//! Async persistence (mode `async`): the reply follows the Redis script and a task drains
//! the acknowledged intents in batches, decided by Postgres like sync claims. A refusal is a
//! lost acknowledgement — the trade-off of this mode — and is counted, logged and exported.
//! Intents it cannot write stay pending in Redis for the reconciler.

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
    time::Duration,
};

use tokio::sync::{mpsc, oneshot};

use super::{CouponEngine, Inner, rebuild::Trigger};
use crate::{
    domain::{ids::TemplateId, template::Template},
    error::EngineResult,
    store::{arbiter::Ruling, batch_connection::BatchConnection, redis::PendingIntent},
};

enum Msg {
    Intent(PendingIntent),
    Flush(oneshot::Sender<()>),
    Stop(oneshot::Sender<()>),
}

/// The claim path's side of the persister.
#[derive(Debug, Clone)]
pub(super) struct Handle {
    tx: mpsc::Sender<Msg>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("persister message")
    }
}

impl Handle {
    /// Queues an intent (waits when the queue is full: back-pressure, not loss).
    pub(super) async fn submit(&self, intent: PendingIntent) {
        if self.tx.send(Msg::Intent(intent)).await.is_err() {
            tracing::warn!("persister stopped; intent stays pending for the reconciler");
        }
    }

    /// Waits until every intent queued before this call is written (or left pending).
    pub(super) async fn flush(&self) -> EngineResult<()> {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
        Ok(())
    }

    /// Writes everything queued, then stops the task.
    pub(super) async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Stop(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

/// Starts the persister task. It holds the engine weakly: a dropped engine ends it.
pub(super) fn spawn(
    engine: Weak<Inner>,
    batch_size: usize,
    interval: Duration,
) -> (Handle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(batch_size.max(1) * 16);
    let task = tokio::spawn(run(engine, rx, batch_size.max(1), interval));
    (Handle { tx }, task)
}

async fn run(
    engine: Weak<Inner>,
    mut rx: mpsc::Receiver<Msg>,
    batch_size: usize,
    interval: Duration,
) {
    let mut batch = Vec::with_capacity(batch_size);
    let mut waiters = Vec::new();
    let mut stopping = false;
    // Made with the first batch: the engine may still be under construction when this
    // task starts.
    let mut conn: Option<BatchConnection> = None;
    loop {
        let next = match &mut conn {
            Some(c) => c.next_message(&mut rx).await,
            None => rx.recv().await,
        };
        let Some(first) = next else { break };
        stopping |= take(first, &mut batch, &mut waiters);
        let deadline = tokio::time::sleep(interval);
        tokio::pin!(deadline);
        while batch.len() < batch_size && waiters.is_empty() {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(m) => stopping |= take(m, &mut batch, &mut waiters),
                    None => break,
                },
                () = &mut deadline => break,
            }
        }
        match engine.upgrade() {
            Some(inner) => {
                let c = conn.get_or_insert_with(|| BatchConnection::new(inner.pg.clone()));
                CouponEngine { inner }
                    .write_acknowledged(std::mem::take(&mut batch), c)
                    .await;
            }
            None => return,
        }
        for w in waiters.drain(..) {
            let _ = w.send(());
        }
        if stopping {
            return;
        }
    }
}

/// Files one message; true if it asks the task to stop.
fn take(msg: Msg, batch: &mut Vec<PendingIntent>, waiters: &mut Vec<oneshot::Sender<()>>) -> bool {
    match msg {
        Msg::Intent(i) => batch.push(i),
        Msg::Flush(w) => waiters.push(w),
        Msg::Stop(w) => {
            waiters.push(w);
            return true;
        }
    }
    false
}

impl CouponEngine {
    /// One batch of acknowledged intents, whatever templates they are of: decided in one
    /// transaction (one WAL flush), then each template's verdicts applied in Redis.
    async fn write_acknowledged(&self, batch: Vec<PendingIntent>, conn: &mut BatchConnection) {
        let mut by_template: HashMap<TemplateId, Vec<PendingIntent>> = HashMap::new();
        for i in batch {
            by_template.entry(i.template_id).or_default().push(i);
        }
        let mut groups = Vec::with_capacity(by_template.len());
        for (template_id, intents) in by_template {
            match self.template(template_id).await {
                Ok(template) => groups.push((template, intents)),
                Err(e) => warn_not_persisted(&e, template_id, intents.len()),
            }
        }
        // A mutant may replace a template's decision (D13 with what it does before the
        // failpoint): each goes on its own.
        if self.inner.config.variant != crate::Variant::Correct {
            for (template, intents) in groups {
                if let Err(e) = self.write_template(&template, &intents, conn).await {
                    warn_not_persisted(&e, template.id, intents.len());
                }
            }
            return;
        }
        self.before_decide().await;
        let batches: Vec<(&Template, &[PendingIntent])> = groups
            .iter()
            .map(|(t, intents)| (&**t, intents.as_slice()))
            .collect();
        let decided = conn.decide_together(&batches).await;
        match decided {
            Ok(verdicts) => {
                for ((template, intents), verdicts) in groups.iter().zip(verdicts) {
                    if let Err(e) = self.apply_verdicts(template.id, intents, &verdicts).await {
                        warn_not_persisted(&e, template.id, intents.len());
                    }
                }
            }
            Err(e) => {
                for (template, intents) in &groups {
                    warn_not_persisted(&e, template.id, intents.len());
                }
            }
        }
    }

    /// One template's batch on its own (the mutants' path, which may replace the decision).
    async fn write_template(
        &self,
        template: &Arc<Template>,
        intents: &[PendingIntent],
        conn: &mut BatchConnection,
    ) -> EngineResult<()> {
        #[cfg(feature = "mutants")]
        if let Some(r) =
            crate::service::mutants::write_acknowledged(self, template, intents, conn).await
        {
            return r;
        }
        self.before_decide().await;
        let arbitration = self.inner.config.variant.arbitration();
        let verdicts = conn.decide(template, intents, arbitration).await?;
        self.apply_verdicts(template.id, intents, &verdicts).await
    }

    /// The failpoint before a batch's decision (where the property tests kill a server with
    /// a batch in flight). Only blocks or delays: a failure here would be one more batch
    /// error, already tested.
    async fn before_decide(&self) {
        let _ = self
            .inner
            .failpoints
            .hit(crate::failpoint::Failpoint::BatchBeforeDecide)
            .await;
    }

    /// What Postgres decided, applied: stored intents leave Redis's pending set, refused
    /// ones are counted as lost acknowledgements.
    async fn apply_verdicts(
        &self,
        template_id: TemplateId,
        intents: &[PendingIntent],
        verdicts: &[Ruling],
    ) -> EngineResult<()> {
        let mut done = Vec::with_capacity(intents.len());
        let mut refused_epoch = None;
        // Every verdict but Stored is an acknowledgement lost (a Duplicate: the request id
        // holds another coupon, so the one acknowledged never exists). Counted once the
        // intent has left Redis: if that fails, the intent stays pending and whoever decides
        // it next counts it, once.
        let mut lost = Vec::new();
        for (intent, verdict) in intents.iter().zip(verdicts) {
            match verdict {
                Ruling::Stored => done.push((&intent.request_id, intent.coupon_id)),
                // The window verdicts come only from the sync group commit's decision; a batch
                // here is stored as admitted. Should one appear, it holds no row: give back.
                Ruling::Duplicate { .. } | Ruling::WindowNotOpen | Ruling::WindowClosed => {
                    self.inner.redis.release_intent(intent).await?;
                    lost.push((intent, verdict));
                }
                Ruling::StockEmpty | Ruling::UserLimit | Ruling::Fenced | Ruling::EpochAhead => {
                    done.push((&intent.request_id, intent.coupon_id));
                    lost.push((intent, verdict));
                    refused_epoch = Some(intent.epoch);
                }
            }
        }
        self.inner.redis.remove_pending(template_id, &done).await?;
        for (intent, verdict) in lost {
            self.inner
                .lost_acks
                .async_refused(template_id, intent, verdict);
        }
        if let Some(epoch) = refused_epoch {
            self.resync(template_id, Trigger::Disagrees(epoch)).await?;
        }
        Ok(())
    }
}

/// A batch (or a template's part of it) that did not reach Postgres: its intents stay
/// pending in Redis for the reconciler.
fn warn_not_persisted(e: &crate::error::EngineError, template_id: TemplateId, n: usize) {
    tracing::warn!(error = %e, %template_id, n,
        "batch not persisted; intents stay pending for the reconciler");
}
