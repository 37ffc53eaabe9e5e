//! A second engine in a case, standing for a second server process on the same stores, that
//! the nemesis can kill mid-batch and restart.
//!
//! The property tests run engines in-process (they call the engine's API, not HTTP), so a
//! kill cannot be a SIGKILL. Each such engine gets a runtime of its own instead, and every
//! operation sent to it runs there: shutting that runtime down drops, at once and without
//! any cleanup step of the engine's, every task it had (the batch in flight, the persister,
//! the claims waiting on it) and with them every socket it held, which the stores then see
//! close — what the kernel does for a killed process. The load test's `server-kill` is the
//! real SIGKILL, of a real `coupon-server`.

use std::{future::Future, sync::Mutex, time::Duration};

use coupon_engine::{CouponEngine, EngineConfig, RedisTarget};
use coupon_testkit::engine_on;
use tokio::runtime::Runtime;

/// An engine with a runtime of its own.
pub struct EngineProcess {
    database_url: String,
    redis: RedisTarget,
    config: EngineConfig,
    running: Mutex<Option<Running>>,
    /// Whether it is up: a client of a killed server waits for the restart (as behind a
    /// load balancer) rather than failing at once, or every operation of its process would
    /// end `unknown` in the instant the server is down.
    up: tokio::sync::watch::Sender<bool>,
}

/// How long an operation waits for a killed engine to come back.
const RESTART_WAIT: Duration = Duration::from_secs(5);

struct Running {
    runtime: Runtime,
    engine: CouponEngine,
}

/// An operation sent to an engine that was killed under it, or that is down.
#[derive(Debug, thiserror::Error)]
#[error("the engine process was killed or is down")]
pub struct Killed;

impl EngineProcess {
    /// Starts an engine on the database at `database_url` and the Redis namespace
    /// `config.namespace`.
    pub async fn start(
        database_url: String,
        redis: RedisTarget,
        config: EngineConfig,
    ) -> anyhow::Result<Self> {
        let process = Self {
            database_url,
            redis,
            config,
            running: Mutex::new(None),
            up: tokio::sync::watch::Sender::new(false),
        };
        process.restart().await?;
        Ok(process)
    }

    /// Starts the engine again (after [`EngineProcess::kill`]), on a new runtime.
    pub async fn restart(&self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("killable-engine")
            .enable_all()
            .build()?;
        let (url, redis, config) = (
            self.database_url.clone(),
            self.redis.clone(),
            self.config.clone(),
        );
        // Built on its own runtime, so that the engine's tasks and connections live there.
        let engine = runtime
            .spawn(async move { engine_on(&url, &redis, config).await })
            .await??;
        let old = self
            .running
            .lock()
            .map_err(|_| anyhow::anyhow!("engine process lock poisoned"))?
            .replace(Running { runtime, engine });
        if let Some(old) = old {
            old.runtime.shutdown_background();
        }
        self.up.send_replace(true);
        Ok(())
    }

    /// Kills the engine: every task and connection it has is dropped where it stands. True
    /// if it was running.
    pub fn kill(&self) -> bool {
        self.up.send_replace(false);
        let taken = self.running.lock().ok().and_then(|mut r| r.take());
        match taken {
            Some(Running { runtime, engine }) => {
                runtime.shutdown_background();
                // The last handle: its pools and Redis connections close with it.
                drop(engine);
                true
            }
            None => false,
        }
    }

    /// The running engine, for arming its failpoints.
    pub fn engine(&self) -> Option<CouponEngine> {
        self.running
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.engine.clone()))
    }

    /// Runs `op` on the engine, on its runtime, once it is up (waiting up to
    /// [`RESTART_WAIT`] for a restart). `Err(Killed)` if it stays down or is killed before
    /// `op` finishes.
    pub async fn call<F, Fut, T>(&self, op: F) -> Result<T, Killed>
    where
        F: FnOnce(CouponEngine) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let mut up = self.up.subscribe();
        let _ = tokio::time::timeout(RESTART_WAIT, up.wait_for(|up| *up)).await;
        let task = {
            let running = self.running.lock().map_err(|_| Killed)?;
            let Some(r) = running.as_ref() else {
                return Err(Killed);
            };
            r.runtime.spawn(op(r.engine.clone()))
        };
        task.await.map_err(|_| Killed)
    }

    /// Drains and stops the engine (its persister's queue written, as at a clean shutdown).
    pub async fn stop(&self, bound: Duration) {
        let _ = tokio::time::timeout(
            bound,
            self.call(|e| async move {
                let _ = e.flush().await;
                e.shutdown().await;
            }),
        )
        .await;
        self.kill();
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        // A runtime may not be dropped inside another's context; this is allowed anywhere.
        self.kill();
    }
}
