//! Async persistence (DESIGN §5.1, mode `async`): a task drains claim intents in batches,
//! one multi-row INSERT … ON CONFLICT DO NOTHING per template per batch. Intents it cannot
//! write stay pending in Redis for the reconciler.

use std::{collections::HashMap, time::Duration};

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::{
    error::EngineResult,
    store::{
        postgres::{self, Persisted},
        redis::{PendingIntent, RedisStore},
    },
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

/// Starts the persister task.
pub(super) fn spawn(
    pg: PgPool,
    redis: RedisStore,
    batch_size: usize,
    interval: Duration,
) -> (Handle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(batch_size.max(1) * 16);
    let task = tokio::spawn(run(pg, redis, rx, batch_size.max(1), interval));
    (Handle { tx }, task)
}

async fn run(
    pg: PgPool,
    redis: RedisStore,
    mut rx: mpsc::Receiver<Msg>,
    batch_size: usize,
    interval: Duration,
) {
    let mut batch = Vec::with_capacity(batch_size);
    let mut waiters = Vec::new();
    let mut stopping = false;
    while let Some(first) = rx.recv().await {
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
        write(&pg, &redis, std::mem::take(&mut batch)).await;
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

async fn write(pg: &PgPool, redis: &RedisStore, batch: Vec<PendingIntent>) {
    let mut by_template: HashMap<Uuid, Vec<PendingIntent>> = HashMap::new();
    for i in batch {
        by_template.entry(i.template_id).or_default().push(i);
    }
    for (template_id, intents) in by_template {
        if let Err(e) = write_template(pg, redis, template_id, &intents).await {
            tracing::warn!(error = %e, %template_id, n = intents.len(),
                "batch not persisted; intents stay pending for the reconciler");
        }
    }
}

async fn write_template(
    pg: &PgPool,
    redis: &RedisStore,
    template_id: Uuid,
    intents: &[PendingIntent],
) -> EngineResult<()> {
    let template = postgres::get_template(pg, template_id)
        .await?
        .ok_or(crate::error::EngineError::NotFound("template"))?;
    let verdicts = postgres::persist_intents(pg, &template, intents).await?;
    let mut done = Vec::with_capacity(intents.len());
    for (intent, verdict) in intents.iter().zip(&verdicts) {
        match verdict {
            Persisted::Stored => done.push((intent.request_id.as_str(), intent.coupon_id)),
            Persisted::Duplicate { .. } => {
                redis
                    .release(
                        template_id,
                        &intent.request_id,
                        &intent.user_id,
                        intent.epoch,
                        intent.coupon_id,
                    )
                    .await?;
            }
            Persisted::Fenced | Persisted::EpochAhead => {
                // Acknowledged but fenced by a rebuild: the price of async mode (DESIGN §5.1).
                tracing::error!(%template_id, request_id = %intent.request_id,
                    "acknowledged async claim fenced by a rebuild and lost");
            }
        }
    }
    redis.remove_pending(template_id, &done).await?;
    Ok(())
}
