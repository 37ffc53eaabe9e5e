//! The Postgres connection of back-to-back claim batches (group commit and async persister).
//!
//! Handed a connection per batch, a batcher meets the pool's idle backends in turn (the pool
//! queues them first in, first out), and each batch then runs on a backend whose caches went
//! cold since its last turn (side by side: README, "Speed"). The connection goes back to the
//! pool when the batcher runs out of work or the pool is exhausted, so a busy template
//! cannot starve the rest of the engine.

use sqlx::{PgPool, Postgres, pool::PoolConnection};

use super::{
    arbiter::{self, Arbitration, Verdict},
    redis::PendingIntent,
};
use crate::{domain::template::Template, error::EngineResult};

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

    /// True while a connection is kept.
    pub fn holds_one(&self) -> bool {
        self.held.is_some()
    }
}
