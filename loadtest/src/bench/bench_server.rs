//! The engine under measurement: an isolated environment (own database and namespace) and
//! an HTTP server on a Tokio runtime of its own, so the load generator's tasks and the
//! server's do not share worker threads.

use std::{sync::Arc, thread::JoinHandle};

use anyhow::Context;
use coupon_engine::{
    CouponEngine, EngineConfig, NewTemplate, Persistence, RefundPolicy,
    domain::ids::{RequestId, UserId},
    http::AppState,
};
use coupon_testkit::{Backends, SpawnedServer, TestEnv, spawn_server};
use tokio::sync::oneshot;
use uuid::Uuid;

/// The user-token secret of the bench server (a development default: the bench server
/// only ever listens on loopback for the length of a run).
pub(crate) const SECRET: &str = "bench-dev-user-secret";

/// A running engine and server.
pub(crate) struct BenchServer {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// The engine behind it (for the in-process rows).
    pub engine: CouponEngine,
    /// A template whose only coupon is gone.
    pub sold_out: Uuid,
    /// A template with stock to spare (and a per-user limit the bench stays under).
    pub granting: Uuid,
    /// [`SPREAD_TEMPLATES`] templates like `granting`, all live: claims spread over them show
    /// what per-template machinery (a batch, a cache entry, Redis keys each) costs.
    pub spread: Arc<[Uuid]>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Coupons one bench user claims from the granting template (its per-user limit): a flash
/// sale's shoppers each take one or a few, and the limit check counts a user's coupons.
pub(crate) const CLAIMS_PER_USER: u64 = 1;

/// Live templates the spread rows share their claims among: a platform runs many sales at
/// once.
pub(crate) const SPREAD_TEMPLATES: usize = 1_000;

/// What [`setup`] made.
struct Made {
    env: TestEnv,
    server: SpawnedServer,
    sold_out: Uuid,
    granting: Uuid,
    spread: Arc<[Uuid]>,
}

impl BenchServer {
    /// Starts an engine in `persistence` mode on `backends`, served on a runtime of its own
    /// with `worker_threads` (the server runs on that runtime's workers).
    pub(crate) fn start(
        backends: Arc<Backends>,
        persistence: Persistence,
        worker_threads: usize,
    ) -> anyhow::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bench-server".into())
            .spawn(move || -> anyhow::Result<()> {
                // Built as `coupon-server --worker-threads N` builds its runtime.
                let rt = coupon_engine::http::runtime::builder(Some(worker_threads))
                    .thread_name("bench-server-rt")
                    .build()
                    .context("server runtime")?;
                rt.block_on(async move {
                    let ready = setup(backends, persistence).await;
                    let Made {
                        env,
                        server,
                        sold_out,
                        granting,
                        spread,
                    } = match ready {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok((
                        server.base_url(),
                        env.engine.clone(),
                        sold_out,
                        granting,
                        spread,
                    )));
                    let _ = stop_rx.await;
                    server.stop().await?;
                    env.engine.shutdown().await;
                    tokio::task::spawn_blocking(move || drop(env)).await?;
                    Ok(())
                })
            })
            .context("starting the server thread")?;
        let (base_url, engine, sold_out, granting, spread) = ready_rx
            .recv()
            .context("the server thread ended before it was ready")??;
        Ok(Self {
            base_url,
            engine,
            sold_out,
            granting,
            spread,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Stops the server and removes its environment.
    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => anyhow::bail!("the server thread panicked"),
            None => Ok(()),
        }
    }
}

/// The bench environment, its templates, and its server (a task of the calling runtime, the
/// bench server's own).
async fn setup(backends: Arc<Backends>, persistence: Persistence) -> anyhow::Result<Made> {
    let config = EngineConfig {
        persistence,
        ..EngineConfig::default()
    };
    let env = TestEnv::on(backends, config)
        .await
        .context("provisioning the bench environment")?;
    let e = &env.engine;
    let sold_out = e
        .create_template(NewTemplate::simple(
            "bench sold out",
            1,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?
        .id;
    let first = (
        UserId::parse("bench-first")?,
        RequestId::parse("bench-first")?,
    );
    e.claim(sold_out, &first.0, &first.1).await?;
    let granting = e
        .create_template(NewTemplate::simple(
            "bench granting",
            1_000_000_000,
            CLAIMS_PER_USER as i32,
            RefundPolicy::ReturnToStock,
        ))
        .await?
        .id;
    let mut spread = Vec::with_capacity(SPREAD_TEMPLATES);
    for i in 0..SPREAD_TEMPLATES {
        let spec = NewTemplate::simple(
            &format!("bench spread {i}"),
            1_000_000,
            CLAIMS_PER_USER as i32,
            RefundPolicy::ReturnToStock,
        );
        spread.push(e.create_template(spec).await?.id.as_uuid());
    }
    // Live: each has sold once, so the rows measure many sales under way, not first claims.
    let mut warm = tokio::task::JoinSet::new();
    for (i, t) in spread.iter().enumerate() {
        let (e, t) = (e.clone(), *t);
        warm.spawn(async move {
            let ids = format!("bench-warm-{i}");
            e.claim(t.into(), &UserId::parse(&ids)?, &RequestId::parse(&ids)?)
                .await
                .map(drop)
                .map_err(anyhow::Error::from)
        });
    }
    while let Some(done) = warm.join_next().await {
        done.context("a warm-up claim")??;
    }
    let server = spawn_server(AppState::new(env.engine.clone(), "bench-admin", SECRET))
        .await
        .context("serving on 127.0.0.1:0")?;
    Ok(Made {
        env,
        server,
        sold_out: sold_out.as_uuid(),
        granting: granting.as_uuid(),
        spread: spread.into(),
    })
}
