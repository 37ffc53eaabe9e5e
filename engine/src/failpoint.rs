//! Named fault-injection points, armed per engine instance (so parallel tests do not see
//! each other's faults). Without the `failpoints` feature every check compiles to nothing.

#[cfg(feature = "failpoints")]
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use crate::error::{EngineError, EngineResult};

/// The places in the engine where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failpoint {
    /// After the Redis claim script succeeded, before the Postgres insert.
    ClaimAfterRedis,
    /// After the Postgres insert committed, before the pending intent is removed.
    ClaimAfterPersist,
    /// After a return_to_stock refund committed, before its outbox row is applied.
    RefundAfterCommit,
    /// Inside the redeem transaction, after the UPDATE, before the use-log INSERT.
    RedeemAfterUpdate,
    /// Inside a rebuild, after Redis was fenced and staged, before the Postgres commit (an
    /// aborted rebuild: client gone, backend terminated, reply timeout).
    RebuildAfterRedis,
    /// A claim batch (sync group commit or async persister) formed, its intents pending in
    /// Redis, just before Postgres is asked to decide it: where a server killed mid-batch
    /// leaves the most in flight.
    BatchBeforeDecide,
}

/// What an armed failpoint does when reached.
#[derive(Debug, Clone)]
pub enum FailAction {
    /// Fail the next `n` passes with an `unavailable` error.
    Error(u32),
    /// Sleep this long on every pass.
    Delay(std::time::Duration),
    /// Every pass signals the gate and waits until it is opened: a test orders events by
    /// this barrier, never by sleeping (a sleep loses the race on a busy machine).
    Block(Gate),
}

/// A barrier a [`FailAction::Block`] failpoint waits at.
///
/// `watch` channels, not `Notify`: a signal sent before anyone waits is kept, so neither
/// side can miss the other whatever the scheduling.
#[derive(Debug, Clone)]
pub struct Gate {
    reached: std::sync::Arc<tokio::sync::watch::Sender<u32>>,
    opened: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate that nothing has reached yet.
    pub fn new() -> Self {
        Self {
            reached: std::sync::Arc::new(tokio::sync::watch::Sender::new(0)),
            opened: std::sync::Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Waits until `n` passes in all have reached the gate.
    pub async fn reached(&self, n: u32) {
        let mut rx = self.reached.subscribe();
        // The sender lives in `self`, so the wait cannot fail.
        let _ = rx.wait_for(|count| *count >= n).await;
    }

    /// Lets every pass that waits, and every later one, through.
    pub fn open(&self) {
        self.opened.send_replace(true);
    }

    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    async fn pass(&self) {
        self.reached.send_modify(|count| *count += 1);
        let mut rx = self.opened.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// The failpoints of one engine.
#[derive(Debug, Clone, Default)]
pub struct Failpoints {
    #[cfg(feature = "failpoints")]
    armed: Arc<Mutex<HashMap<Failpoint, FailAction>>>,
}

impl Failpoints {
    /// Arms `point` with `action` (only with the `failpoints` feature; otherwise ignored).
    #[allow(unused_variables)]
    pub fn arm(&self, point: Failpoint, action: FailAction) {
        #[cfg(feature = "failpoints")]
        if let Ok(mut armed) = self.armed.lock() {
            armed.insert(point, action);
        }
    }

    /// Disarms `point`.
    #[allow(unused_variables)]
    pub fn disarm(&self, point: Failpoint) {
        #[cfg(feature = "failpoints")]
        if let Ok(mut armed) = self.armed.lock() {
            armed.remove(&point);
        }
    }

    /// Called by the engine at `point`: fails or delays when armed.
    #[allow(unused_variables)]
    pub(crate) async fn hit(&self, point: Failpoint) -> EngineResult<()> {
        #[cfg(feature = "failpoints")]
        {
            let action = match self.armed.lock() {
                Ok(mut armed) => match armed.get_mut(&point) {
                    Some(FailAction::Error(n)) => {
                        let fire = *n > 0;
                        *n = n.saturating_sub(1);
                        fire.then_some(FailAction::Error(1))
                    }
                    Some(a) => Some(a.clone()),
                    None => None,
                },
                Err(_) => None,
            };
            match action {
                Some(FailAction::Error(_)) => {
                    return Err(EngineError::Unavailable(format!("failpoint {point:?}")));
                }
                Some(FailAction::Delay(d)) => tokio::time::sleep(d).await,
                Some(FailAction::Block(gate)) => gate.pass().await,
                None => {}
            }
        }
        Ok(())
    }
}

// Keeps the import used when the feature is off.
const _: fn() -> EngineError = || EngineError::Busy;
