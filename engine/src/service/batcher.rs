//! Group commit of sync claims (docs/ARCHITECTURE.md, "Group commit"): claims that Redis
//! admitted queue in one of [`LANES`] lanes (by template); one task per lane takes what has
//! queued (up to `max_batch`, waiting at most `max_wait` for more), has Postgres decide the
//! whole batch in one transaction — each template's part under its own counter row, in
//! template order — then answers every waiting claim with its own verdict. While a batch
//! commits, the next one fills, so a template's hot row and the fsync are paid once per
//! batch instead of once per claim, and claims spread over many live templates still share
//! a transaction (one queue per template gave each of them a batch of one).
//!
//! A batch commits synchronously and its claims are answered from that commit; the fsync is
//! inside the hot row's lock, and what queues during it is the next batch. Answering (and
//! the Redis call that follows) runs in a task of its own, off the worker's path.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::{
    domain::{
        ids::{RequestId, TemplateId},
        template::Template,
    },
    error::{EngineError, EngineResult},
    failpoint::{Failpoint, Failpoints},
    store::{
        arbiter::{Arbitration, Ruling},
        batch_connection::BatchConnection,
        redis::{PendingIntent, RedisStore},
    },
    variant::Variant,
};

/// Queues (and workers) of one engine. A hot template has a lane's worker to itself but
/// for the others hashed there; several hot templates commit side by side in several lanes;
/// claims over many templates share a lane's batches.
const LANES: u64 = 4;

/// The lane of `template`.
fn lane(template: TemplateId) -> u64 {
    let (high, low) = template.as_uuid().as_u64_pair();
    (high ^ low) % LANES
}

/// A worker with nothing queued for this long stops (the next claim starts another).
const IDLE_STOP: Duration = Duration::from_secs(30);
/// A batch whose transaction failed is tried this many times before its claims get 503.
const ATTEMPTS: u32 = 3;
/// Upper bounds of the batch-size histogram buckets.
pub const BATCH_BUCKETS: [u64; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// How long a batch may wait on Postgres: a quarter of the request deadline less, so the
/// batch is abandoned (its connection dropped, the pool's idle ones closed) and its claims
/// answered with the precise reason before the HTTP layer's own bound answers for them; a
/// client's next request then meets fresh connections, not the ones that hung.
fn batch_bound(deadline: Duration) -> Duration {
    if deadline == Duration::MAX {
        return deadline;
    }
    deadline.saturating_sub(deadline / 4)
}

/// How batches are formed.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Most intents per transaction.
    pub max_batch: usize,
    /// Longest a claim waits for others to join its batch (zero: take only what queued
    /// while the previous batch committed).
    pub max_wait: Duration,
}

/// Batch sizes seen, as a cumulative histogram (for `/metrics`).
#[derive(Debug, Default)]
pub struct BatchStats {
    buckets: [AtomicU64; BATCH_BUCKETS.len()],
    count: AtomicU64,
    sum: AtomicU64,
    micros: AtomicU64,
    waited_micros: AtomicU64,
}

/// A copy of [`BatchStats`]: cumulative bucket counts, number of batches, total intents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchHistogram {
    /// Batches of size ≤ `BATCH_BUCKETS[i]`.
    pub buckets: Vec<u64>,
    /// Batches committed.
    pub count: u64,
    /// Intents decided.
    pub sum: u64,
    /// Time spent in the batches' transactions (their WAL flush included), microseconds.
    pub micros: u64,
    /// Time the claims spent in the group commit, from joining a queue to their verdict
    /// (queued, decided, committed), summed over claims, microseconds.
    pub waited_micros: u64,
}

impl BatchStats {
    fn observe(&self, size: usize, took: Duration) {
        self.micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        let size = size as u64;
        for (b, le) in self.buckets.iter().zip(BATCH_BUCKETS) {
            if size <= le {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(size, Ordering::Relaxed);
    }

    /// The histogram so far.
    pub fn snapshot(&self) -> BatchHistogram {
        BatchHistogram {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            micros: self.micros.load(Ordering::Relaxed),
            waited_micros: self.waited_micros.load(Ordering::Relaxed),
        }
    }
}

struct Job {
    template: Arc<Template>,
    intent: PendingIntent,
    reply: oneshot::Sender<EngineResult<Ruling>>,
}

/// The per-template queues of one engine.
pub(super) struct Batcher {
    pg: PgPool,
    redis: RedisStore,
    limits: BatchLimits,
    variant: Variant,
    /// How long a claim waits for its verdict, and a batch for Postgres.
    deadline: Duration,
    queues: Mutex<HashMap<u64, mpsc::Sender<Job>>>,
    stats: Arc<BatchStats>,
    /// The runtime the engine was built on, where every template's worker runs (None
    /// outside one: then the first claim's runtime).
    runtime: Option<tokio::runtime::Handle>,
    failpoints: Failpoints,
}

impl Batcher {
    pub(super) fn new(
        pg: PgPool,
        redis: RedisStore,
        limits: BatchLimits,
        variant: Variant,
        deadline: Duration,
        failpoints: Failpoints,
    ) -> Self {
        Self {
            pg,
            redis,
            limits: BatchLimits {
                max_batch: limits.max_batch.max(1),
                ..limits
            },
            variant,
            deadline,
            queues: Mutex::new(HashMap::new()),
            stats: Arc::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            failpoints,
        }
    }

    pub(super) fn stats(&self) -> &BatchStats {
        &self.stats
    }

    /// Queues one admitted intent and waits for Postgres's verdict on it.
    pub(super) async fn decide(
        &self,
        template: Arc<Template>,
        intent: PendingIntent,
    ) -> EngineResult<Ruling> {
        let joined = std::time::Instant::now();
        let (reply, answer) = oneshot::channel();
        let mut job = Job {
            template,
            intent,
            reply,
        };
        // A worker that stopped (idle) closed its queue; the second try starts a new one.
        for _ in 0..2 {
            let lane = lane(job.template.id);
            let queue = self.queue(lane);
            match queue.send(job).await {
                Ok(()) => {
                    // Bounded: a batch abandoned at its own deadline answers sooner, but the
                    // queue before it may be long; the claim's outcome is then unknown.
                    let wait = if self.variant.has_deadlines() {
                        self.deadline
                    } else {
                        Duration::MAX
                    };
                    let verdict = tokio::time::timeout(wait, answer)
                        .await
                        .map_err(|_| {
                            EngineError::Unavailable(
                                "no verdict from Postgres within the deadline; the outcome \
                                 is unknown: retry with the same request_id"
                                    .into(),
                            )
                        })?
                        .map_err(|_| {
                            EngineError::Unavailable("the claim batcher stopped".into())
                        })?;
                    self.stats
                        .waited_micros
                        .fetch_add(joined.elapsed().as_micros() as u64, Ordering::Relaxed);
                    return verdict;
                }
                Err(mpsc::error::SendError(back)) => {
                    job = back;
                    if let Ok(mut q) = self.queues.lock()
                        && q.get(&lane).is_some_and(|s| s.same_channel(&queue))
                    {
                        q.remove(&lane);
                    }
                }
            }
        }
        Err(EngineError::Unavailable(
            "the claim batcher could not take the claim".into(),
        ))
    }

    fn queue(&self, lane: u64) -> mpsc::Sender<Job> {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        queues
            .entry(lane)
            .or_insert_with(|| {
                let (tx, rx) = mpsc::channel(self.limits.max_batch * 4);
                let committer = Committer {
                    #[cfg(feature = "mutants")]
                    pg: self.pg.clone(),
                    redis: self.redis.clone(),
                    arbitration: self.variant.arbitration(),
                    #[cfg(feature = "mutants")]
                    waits_for_flush: self.variant.waits_for_durability(),
                    stats: self.stats.clone(),
                    failpoints: self.failpoints.clone(),
                    conn: if self.variant.window_by_postgres() {
                        BatchConnection::judging_window(self.pg.clone())
                    } else {
                        BatchConnection::new(self.pg.clone())
                    },
                    deadline: if self.variant.has_deadlines() {
                        self.deadline
                    } else {
                        Duration::MAX
                    },
                };
                // On the engine's runtime, not the first claimer's: a worker, its answering
                // tasks and the server's claims then share worker threads, and a caller on
                // another runtime (an in-process client) does not end up hosting the group
                // commit of every claim that follows.
                let worker = work(rx, committer, self.limits);
                match &self.runtime {
                    Some(rt) => drop(rt.spawn(worker)),
                    None => drop(tokio::spawn(worker)),
                }
                tx
            })
            .clone()
    }
}

/// What one lane's worker needs to commit a batch.
struct Committer {
    #[cfg(feature = "mutants")]
    pg: PgPool,
    redis: RedisStore,
    arbitration: Arbitration,
    /// False only in mutant D9.
    #[cfg(feature = "mutants")]
    waits_for_flush: bool,
    stats: Arc<BatchStats>,
    failpoints: Failpoints,
    conn: BatchConnection,
    deadline: Duration,
}

async fn work(mut rx: mpsc::Receiver<Job>, mut committer: Committer, limits: BatchLimits) {
    let mut batch = Vec::with_capacity(limits.max_batch);
    loop {
        let next = committer.conn.next_message_within(&mut rx, IDLE_STOP).await;
        let first = match next {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_) => {
                // Stop taking claims, but answer the ones already queued.
                rx.close();
                while let Ok(job) = rx.try_recv() {
                    batch.push(job);
                }
                if !batch.is_empty() {
                    committer.commit(std::mem::take(&mut batch)).await;
                }
                return;
            }
        };
        batch.push(first);
        fill(&mut rx, &mut batch, limits).await;
        committer.commit(std::mem::take(&mut batch)).await;
    }
}

/// Takes what is queued, then waits up to `max_wait` for more, up to `max_batch`.
async fn fill(rx: &mut mpsc::Receiver<Job>, batch: &mut Vec<Job>, limits: BatchLimits) {
    while batch.len() < limits.max_batch
        && let Ok(job) = rx.try_recv()
    {
        batch.push(job);
    }
    if limits.max_wait.is_zero() {
        return;
    }
    let deadline = tokio::time::sleep(limits.max_wait);
    tokio::pin!(deadline);
    while batch.len() < limits.max_batch {
        tokio::select! {
            job = rx.recv() => match job {
                Some(job) => batch.push(job),
                None => return,
            },
            () = &mut deadline => return,
        }
    }
}

/// One template's part of a batch: the positions of its jobs.
struct Part {
    template: Arc<Template>,
    jobs: Vec<usize>,
}

/// The batch's jobs grouped by template, in order of first appearance.
fn parts(batch: &[Job]) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut index: HashMap<TemplateId, usize> = HashMap::new();
    for (i, job) in batch.iter().enumerate() {
        let at = *index.entry(job.template.id).or_insert_with(|| {
            parts.push(Part {
                template: job.template.clone(),
                jobs: Vec::new(),
            });
            parts.len() - 1
        });
        parts[at].jobs.push(i);
    }
    parts
}

impl Committer {
    async fn commit(&mut self, batch: Vec<Job>) {
        let stats = self.stats.clone();
        if batch.is_empty() {
            return;
        }
        let parts = parts(&batch);
        let intents: Vec<Vec<PendingIntent>> = parts
            .iter()
            .map(|p| p.jobs.iter().map(|&i| batch[i].intent.clone()).collect())
            .collect();
        let templates: Vec<TemplateId> = parts.iter().map(|p| p.template.id).collect();
        // Only blocks or delays: a failure here would be one more batch error, already tested.
        let _ = self.failpoints.hit(Failpoint::BatchBeforeDecide).await;
        let mut last_error = None;
        for attempt in 0..ATTEMPTS {
            let started = std::time::Instant::now();
            // A retry is safe even if an earlier commit went through unseen: the intents carry
            // their coupon ids, so the lookup then answers `Stored` for them.
            let decided =
                tokio::time::timeout(batch_bound(self.deadline), self.decide(&parts, &intents))
                    .await;
            let Ok(decided) = decided else {
                // Postgres did not answer within the deadline: a partition, a paused server,
                // a stalled disk. The batch is abandoned, not retried (a retry would wait on
                // the same dead link while the lane's claims queue behind it); its
                // connection is dropped, never reused, and its intents stay pending in
                // Redis for the reconciler, which settles them against what Postgres
                // committed, as it does a crashed batch's.
                self.conn.abandon();
                tracing::warn!(templates = ?templates, size = batch.len(),
                    bound_ms = batch_bound(self.deadline).as_millis() as u64,
                    "claim batch abandoned: postgres did not answer within the deadline");
                last_error = Some("postgres did not answer within the deadline".to_owned());
                break;
            };
            match decided {
                Ok(verdicts) => {
                    stats.observe(batch.len(), started.elapsed());
                    let mut replies: Vec<Option<_>> =
                        batch.into_iter().map(|j| Some(j.reply)).collect();
                    for ((part, intents), verdicts) in parts.iter().zip(intents).zip(verdicts) {
                        let replies = part.jobs.iter().filter_map(|&i| replies[i].take());
                        let settle = Settle {
                            redis: self.redis.clone(),
                            intents,
                        };
                        // Off the worker's path: the next batch is already queued.
                        tokio::spawn(settle.answer(replies.collect(), verdicts));
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, templates = ?templates, attempt,
                        size = batch.len(), "claim batch failed");
                    last_error = Some(e.to_string());
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                }
            }
        }
        let why = last_error.unwrap_or_default();
        for job in batch {
            let _ = job.reply.send(Err(EngineError::Unavailable(format!(
                "the claim's batch could not be committed ({why}); retry with the same request_id"
            ))));
        }
    }

    /// Every part's verdicts, in the parts' order: one transaction for them all when
    /// Postgres arbitrates; a transaction per template for the mutants that trust Redis or
    /// do not wait for the flush (each has a batch function of its own).
    async fn decide(
        &mut self,
        parts: &[Part],
        intents: &[Vec<PendingIntent>],
    ) -> EngineResult<Vec<Vec<Ruling>>> {
        let arbitration = self.arbitration;
        #[cfg(feature = "mutants")]
        if !self.waits_for_flush || arbitration != Arbitration::Enforced {
            let mut all = Vec::with_capacity(parts.len());
            for (part, intents) in parts.iter().zip(intents) {
                let verdicts = if self.waits_for_flush {
                    self.conn
                        .decide(&part.template, intents, arbitration)
                        .await?
                } else {
                    crate::store::arbiter::decide_batch_unflushed(
                        &self.pg,
                        &part.template,
                        intents,
                        arbitration,
                    )
                    .await?
                };
                all.push(verdicts);
            }
            return Ok(all);
        }
        if let [part] = parts {
            // One template: its function alone, as autocommit (no BEGIN/COMMIT round trips).
            let verdicts = self
                .conn
                .decide(&part.template, &intents[0], arbitration)
                .await?;
            return Ok(vec![verdicts]);
        }
        let batches: Vec<(&Template, &[PendingIntent])> = parts
            .iter()
            .zip(intents)
            .map(|(p, i)| (&*p.template, i.as_slice()))
            .collect();
        self.conn.decide_together(&batches).await
    }
}

/// A batch's intents, to take out of Redis's pending set once their rows are stored.
struct Settle {
    redis: RedisStore,
    intents: Vec<PendingIntent>,
}

impl Settle {
    /// Answers every claim, then removes the stored ones' pending intents in one Redis call
    /// (one per batch, not one per claim). A claim stands once its row is durable, so the
    /// removal may fail: the reconciler removes a leftover intent whose row exists.
    async fn answer(
        self,
        replies: Vec<oneshot::Sender<EngineResult<Ruling>>>,
        verdicts: Vec<Ruling>,
    ) {
        let stored: Vec<(&RequestId, Uuid)> = self
            .intents
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| **v == Ruling::Stored)
            .map(|(i, _)| (&i.request_id, i.coupon_id))
            .collect();
        for (reply, verdict) in replies.into_iter().zip(verdicts.iter().cloned()) {
            let _ = reply.send(Ok(verdict));
        }
        let Some(template_id) = self.intents.first().map(|i| i.template_id) else {
            return;
        };
        if let Err(e) = self.redis.remove_pending(template_id, &stored).await {
            tracing::warn!(error = %e, %template_id, left = stored.len(), "pending intents left behind");
        }
    }
}
