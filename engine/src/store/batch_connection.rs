//! The Postgres connection of back-to-back claim batches (group commit and async persister).
//!
//! Handed a connection per batch, a batcher meets the pool's idle backends in turn (the pool
//! queues them first in, first out), and each batch then runs on a backend whose caches went
//! cold since its last turn (side by side: README, "Speed"). The connection goes back to the
//! pool when the batcher's work stops for longer than a short lull, or when the pool is
//! exhausted, so a busy template cannot starve the rest of the engine.

use std::time::Duration;

use sqlx::{PgPool, Postgres, pool::PoolConnection};
use tokio::{sync::mpsc, time::error::Elapsed};

use super::{
    arbiter::{self, Arbitration, Verdict},
    redis::PendingIntent,
};
use crate::{domain::template::Template, error::EngineResult};

/// How long a batcher whose queue ran dry keeps its connection. Between two batches the
/// queue is often empty for a moment (the claims just answered are on their way back through
/// HTTP and Redis); given back at once, the next batch met another backend of the pool,
/// its caches cold: under the bench's sync load the batches ran on some ten backends in
/// turn, and on one with this pause (README, "Speed").
pub const LULL: Duration = Duration::from_millis(5);

/// A pool connection kept from one batch to the next while work keeps coming.
pub struct BatchConnection {
    pool: PgPool,
    held: Option<PoolConnection<Postgres>>,
}

impl BatchConnection {
    /// Holds nothing until the first batch.
    pub fn new(pool: PgPool) -> Self {
        Self { pool, held: None }
    }

    /// [`arbiter::decide_batch`] on the kept connection (taken from the pool if none is).
    pub async fn decide(
        &mut self,
        template: &Template,
        intents: &[PendingIntent],
        arbitration: Arbitration,
    ) -> EngineResult<Vec<Verdict>> {
        let conn = match &mut self.held {
            Some(conn) => conn,
            None => self.held.insert(self.pool.acquire().await?),
        };
        let decided = arbiter::decide_batch_on(conn, template, intents, arbitration).await;
        if decided.is_err() {
            // Whatever failed may have left the connection unusable; the next batch (or the
            // retry) takes another.
            self.held = None;
        }
        decided
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

    /// The next message of `rx`, the connection kept while it comes within [`LULL`] (unless
    /// the pool is exhausted) and given back after; then it waits up to `idle` (None: as long
    /// as it takes). Err: nothing came within `idle`; Ok(None): `rx` is closed.
    pub async fn next_message<T>(
        &mut self,
        rx: &mut mpsc::Receiver<T>,
        idle: Option<Duration>,
    ) -> Result<Option<T>, Elapsed> {
        self.between_batches(true);
        if let Ok(queued) = rx.try_recv() {
            return Ok(Some(queued));
        }
        if let Ok(next) = tokio::time::timeout(LULL, rx.recv()).await {
            return Ok(next);
        }
        self.between_batches(false);
        match idle {
            Some(idle) => tokio::time::timeout(idle, rx.recv()).await,
            None => Ok(rx.recv().await),
        }
    }

    /// True while a connection is kept.
    pub fn holds_one(&self) -> bool {
        self.held.is_some()
    }
}
