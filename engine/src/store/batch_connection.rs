//! The Postgres connection of back-to-back claim batches (group commit and async persister).
//!
//! Handed a connection per batch, a batcher meets the pool's idle backends in turn (the pool
//! queues them first in, first out), and each batch then runs on a backend whose caches went
//! cold since its last turn (side by side: docs/speed-log.md). The connection goes back to the
//! pool when the batcher's work stops for longer than a short lull, or when the pool is
//! exhausted, so a busy template cannot starve the rest of the engine.

use std::time::Duration;

use sqlx::{PgPool, Postgres, pool::PoolConnection};
use tokio::{sync::mpsc, time::error::Elapsed};

use super::{
    arbiter::{self, Arbitration, Ruling, Window},
    redis::PendingIntent,
};
use crate::{domain::template::Template, error::EngineResult};

/// How long a batcher whose queue ran dry keeps its connection. Between two batches the
/// queue is often empty for a moment (the claims just answered are on their way back through
/// HTTP and Redis); given back at once, the next batch met another backend of the pool,
/// its caches cold: under the bench's sync load the batches ran on some ten backends in
/// turn, and on one with this pause (docs/speed-log.md).
pub const LULL: Duration = Duration::from_millis(5);

/// A pool connection kept from one batch to the next while work keeps coming.
pub struct BatchConnection {
    pool: PgPool,
    held: Option<PoolConnection<Postgres>>,
    window: Window,
}

impl BatchConnection {
    /// Holds nothing until the first batch; batches are stored as admitted (the async
    /// persister's).
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            held: None,
            window: Window::AsAdmitted,
        }
    }

    /// [`Self::new`] for batches whose claim window Postgres judges (the sync group commit's).
    pub fn judging_window(pool: PgPool) -> Self {
        Self {
            window: Window::JudgedByPostgres,
            ..Self::new(pool)
        }
    }

    /// [`arbiter::decide_batch`] on the kept connection (taken from the pool if none is).
    pub async fn decide(
        &mut self,
        template: &Template,
        intents: &[PendingIntent],
        arbitration: Arbitration,
    ) -> EngineResult<Vec<Ruling>> {
        let conn = match &mut self.held {
            Some(conn) => conn,
            None => self.held.insert(self.pool.acquire().await?),
        };
        let decided =
            arbiter::decide_batch_within(conn, template, intents, arbitration, self.window).await;
        if decided.is_err() {
            // Whatever failed may have left the connection unusable; the next batch (or the
            // retry) takes another.
            self.held = None;
        }
        decided
    }

    /// [`arbiter::decide_batches_together`] on the kept connection: several templates'
    /// batches in one transaction.
    pub async fn decide_together(
        &mut self,
        batches: &[(&Template, &[PendingIntent])],
    ) -> EngineResult<Vec<Vec<Ruling>>> {
        let conn = match &mut self.held {
            Some(conn) => conn,
            None => self.held.insert(self.pool.acquire().await?),
        };
        let decided = arbiter::decide_batches_together(conn, batches, self.window).await;
        if decided.is_err() {
            self.held = None;
        }
        decided
    }

    /// Drops the kept connection without giving it back to the pool: a statement on it
    /// was abandoned mid-flight, so it may still be waiting on a dead link. Detached, it no
    /// longer counts against the pool's size, and the next batch opens another.
    ///
    /// The pool's idle connections are closed too: they went the same way as the one that
    /// hung (a partition, a server gone behind a moved address), and with no ping before a
    /// connection is handed out, each would cost the next batches a deadline of their own.
    /// Fresh connections cost a few milliseconds, or fail fast if the store is truly gone.
    pub fn abandon(&mut self) {
        if let Some(conn) = self.held.take() {
            drop(conn.detach());
        }
        while let Some(idle) = self.pool.try_acquire() {
            drop(idle.detach());
        }
    }

    /// Called between batches: keeps the connection only if more work is already waiting
    /// and the pool is not exhausted (someone may be waiting for a connection).
    pub fn between_batches(&mut self, more_waiting: bool) {
        let exhausted = self.pool.num_idle() == 0
            && self.pool.size() >= self.pool.options().get_max_connections();
        if !more_waiting || exhausted {
            self.held = None;
        }
    }

    /// The next message of `rx` (None: `rx` is closed), however long it takes; the
    /// connection is kept while it comes within [`LULL`] (unless the pool is exhausted) and
    /// given back after.
    pub async fn next_message<T>(&mut self, rx: &mut mpsc::Receiver<T>) -> Option<T> {
        match self.within_lull(rx).await {
            Some(next) => next,
            None => rx.recv().await,
        }
    }

    /// [`Self::next_message`], waiting at most `idle` past the lull. Err: nothing came.
    pub async fn next_message_within<T>(
        &mut self,
        rx: &mut mpsc::Receiver<T>,
        idle: Duration,
    ) -> Result<Option<T>, Elapsed> {
        match self.within_lull(rx).await {
            Some(next) => Ok(next),
            None => tokio::time::timeout(idle, rx.recv()).await,
        }
    }

    /// What `rx` answered within the lull, the connection kept; None: the lull passed and
    /// the connection was given back.
    async fn within_lull<T>(&mut self, rx: &mut mpsc::Receiver<T>) -> Option<Option<T>> {
        self.between_batches(true);
        if let Ok(queued) = rx.try_recv() {
            return Some(Some(queued));
        }
        if let Ok(next) = tokio::time::timeout(LULL, rx.recv()).await {
            return Some(next);
        }
        self.between_batches(false);
        None
    }

    /// True while a connection is kept.
    pub fn holds_one(&self) -> bool {
        self.held.is_some()
    }
}
