//! What `coupon-server` and `coupon-server-mutants` share: the flags, the start-up checks
//! and the serving loop. Two binaries rather than one flag behind a feature: Cargo unifies
//! features across a workspace build, so a `coupon-server` that accepted `--mutant` whenever
//! the `mutants` feature was on would accept it in every `cargo build --workspace` (the
//! harness crates turn the feature on). A separate binary with `required-features` keeps
//! `coupon-server` free of the flag in every build.
//!
//! Every flag can also be set from the environment; `--help` lists them. Migrations are
//! applied at start; the database must exist. SIGINT/SIGTERM drain in-flight requests and
//! the async persister before exit.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use coupon_engine::{
    CouponEngine, EngineConfig, Persistence, RedisTarget, Variant,
    http::{AppState, serve},
};
use tracing_subscriber::EnvFilter;

/// mimalloc rather than the system allocator: each request allocates and frees buffers and
/// boxed futures of a few kilobytes, which glibc serves from its slower bins (under
/// `coupon-loadtest bench`, ~9% of the server threads' CPU was in `malloc_consolidate` and
/// `unlink_chunk`). `coupon-loadtest` uses the same, so the bench measures this server.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Development default of the admin token: never use it in production.
const DEV_ADMIN_TOKEN: &str = "dev-admin-token";
/// Development default of the user-token secret: never use it in production.
const DEV_USER_SECRET: &str = "dev-user-token-secret";

/// The flags of the server, shared by both binaries.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, env = "COUPON_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Redis URL (one server; ignored when --redis-cluster-nodes is set). It may carry a
    /// password, so `--help` never shows the value it was given.
    #[arg(
        long,
        env = "COUPON_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/",
        hide_env_values = true
    )]
    redis_url: String,
    /// Redis Cluster mode: comma-separated redis:// seed nodes (any reachable subset of the
    /// cluster), e.g. redis://10.0.0.1:7000/,redis://10.0.0.2:7000/. Each template's keys
    /// share one hash slot; MOVED/ASK and failovers are followed by the client, and a
    /// promoted or restarted master (a new run_id) has the live templates rebuilt from
    /// Postgres.
    #[arg(long, env = "COUPON_REDIS_CLUSTER_NODES", hide_env_values = true)]
    redis_cluster_nodes: Option<String>,
    /// Postgres URL (the database must exist; migrations are applied). It may carry a
    /// password, so `--help` never shows the value it was given.
    #[arg(
        long,
        env = "COUPON_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test",
        hide_env_values = true
    )]
    database_url: String,
    /// Prefix of every Redis key.
    #[arg(long, env = "COUPON_REDIS_NAMESPACE", default_value = "coupon")]
    redis_namespace: String,
    /// Admin bearer token (a development default is used, loudly and on a loopback listener
    /// only, if unset).
    #[arg(long, env = "COUPON_ADMIN_TOKEN", default_value = DEV_ADMIN_TOKEN,
          hide_default_value = true, hide_env_values = true)]
    admin_token: String,
    /// Secret of the user tokens' HMAC (a development default is used, loudly and on a
    /// loopback listener only, if unset).
    #[arg(long, env = "COUPON_USER_TOKEN_SECRET", default_value = DEV_USER_SECRET,
          hide_default_value = true, hide_env_values = true)]
    user_token_secret: String,
    /// Bearer token of the order service. When set, only it may redeem (redeem takes
    /// `order_amount` from its caller); when unset, shoppers redeem with their user tokens.
    #[arg(long, env = "COUPON_SERVICE_TOKEN", hide_env_values = true)]
    service_token: Option<String>,
    /// Claim persistence: sync (reply after the Postgres row) or async (batched).
    #[arg(long, env = "COUPON_PERSISTENCE", default_value = "sync")]
    persistence: Persistence,
    /// Redeem lock: on or off.
    #[arg(long, env = "COUPON_REDEEM_LOCK", default_value = "on", value_parser = ["on", "off"])]
    redeem_lock: String,
    /// Postgres pool size.
    #[arg(long, env = "COUPON_DB_POOL_SIZE", default_value_t = 20)]
    db_pool_size: u32,
    /// Seconds between background reconcile + expiry passes (0 = off).
    #[arg(long, env = "COUPON_RECONCILE_INTERVAL", default_value_t = 10)]
    reconcile_interval: u64,
    /// Sync mode: most claims Postgres decides in one transaction (group commit).
    #[arg(long, env = "COUPON_GROUP_COMMIT_MAX", default_value_t = 512)]
    group_commit_max: usize,
    /// Sync mode: milliseconds a claim may wait for others to join its batch (0: a batch is
    /// whatever queued while the previous one committed; no added latency).
    #[arg(long, env = "COUPON_GROUP_COMMIT_WAIT_MS", default_value_t = 0)]
    group_commit_wait_ms: u64,
    /// Milliseconds within which every request is answered: past it, 503 `unavailable`
    /// with the outcome unknown (retry with the same ids). A claim batch stuck on a Postgres
    /// that stopped answering is abandoned at this bound; SIGTERM drains within it plus 1 s.
    #[arg(long, env = "COUPON_DEADLINE_MS", default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    deadline_ms: u64,
    /// Milliseconds the sold-out gate stands before it is checked again: a sold-out
    /// template's claims are refused without Redis, and stock given back through another
    /// server is admitted here again within this bound (0: no gate, every claim reaches
    /// Redis).
    #[arg(long, env = "COUPON_SOLD_OUT_RECHECK_MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    sold_out_recheck_ms: u64,
    /// Tokio worker threads that serve requests (default: one per CPU). On a machine whose
    /// cores the server shares with Redis and Postgres, fewer workers than cores wake each
    /// other less often, and that is CPU the stores get; one runs everything on the main
    /// thread, on a current-thread runtime, the cheapest (docs/speed-log.md).
    #[arg(long, env = "COUPON_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    worker_threads: Option<u16>,
}

/// The runtime the server runs on, with `--worker-threads` workers (one: the main thread
/// runs everything, `coupon_engine::http::runtime`).
pub fn runtime(args: &ServerArgs) -> anyhow::Result<tokio::runtime::Runtime> {
    coupon_engine::http::runtime::builder(args.worker_threads.map(usize::from))
        .build()
        .context("starting the Tokio runtime")
}

/// Logs on stdout (`RUST_LOG`, default info).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
}

/// Checks the secrets, connects, and serves `variant` until SIGINT/SIGTERM.
pub async fn run(args: ServerArgs, variant: Variant) -> anyhow::Result<()> {
    // An empty admin token would accept `Bearer ` with nothing after it; an empty secret
    // would make every user token guessable. Several servers behind a balancer share them,
    // so a missing value must stop the start, not silently weaken it.
    anyhow::ensure!(
        !args.admin_token.trim().is_empty(),
        "COUPON_ADMIN_TOKEN / --admin-token is empty; set a secret (or leave it unset for the development default)"
    );
    anyhow::ensure!(
        !args.user_token_secret.trim().is_empty(),
        "COUPON_USER_TOKEN_SECRET / --user-token-secret is empty; set a secret (or leave it unset for the development default)"
    );
    if let Some(service) = &args.service_token {
        anyhow::ensure!(
            !service.trim().is_empty(),
            "COUPON_SERVICE_TOKEN / --service-token is empty; set a secret, or unset it to let shoppers redeem"
        );
        anyhow::ensure!(
            *service != args.admin_token,
            "COUPON_SERVICE_TOKEN must differ from COUPON_ADMIN_TOKEN: the order service is not an admin"
        );
    } else {
        tracing::warn!(
            "no COUPON_SERVICE_TOKEN: shoppers lock, redeem, release and refund with their own \
             tokens and choose order_amount, so a shopper can refund an order the shop never \
             refunded and use the coupon again; give checkout and refunds to the order service \
             by setting one"
        );
    }
    let dev_secrets =
        args.admin_token == DEV_ADMIN_TOKEN || args.user_token_secret == DEV_USER_SECRET;
    // The development secrets are printed in this source: anyone who reads it could mint
    // user tokens or act as admin, so they may only ever answer this machine.
    anyhow::ensure!(
        !dev_secrets || args.listen.ip().is_loopback(),
        "refusing to listen on {} with the development secrets: set COUPON_ADMIN_TOKEN and \
         COUPON_USER_TOKEN_SECRET, or listen on a loopback address",
        args.listen
    );
    if dev_secrets {
        tracing::warn!(
            "RUNNING WITH DEVELOPMENT SECRETS: set COUPON_ADMIN_TOKEN and \
             COUPON_USER_TOKEN_SECRET before exposing this server"
        );
    }
    let config = EngineConfig {
        namespace: args.redis_namespace.clone(),
        persistence: args.persistence,
        redeem_lock: args.redeem_lock == "on",
        group_commit_max: args.group_commit_max.max(1),
        group_commit_wait: std::time::Duration::from_millis(args.group_commit_wait_ms),
        deadline: std::time::Duration::from_millis(args.deadline_ms),
        sold_out_recheck: Duration::from_millis(args.sold_out_recheck_ms),
        // The auditor's bound on a lapsed lock waiting for its sweep (I12). Without a
        // sweep (interval 0) lapsed locks stay as they are, harmless: they hold nothing.
        lock_sweep_every: Duration::from_secs(match args.reconcile_interval {
            0 => 365 * 24 * 3600,
            secs => secs,
        }),
        variant,
        ..EngineConfig::default()
    };
    let redis = match args.redis_cluster_nodes.as_deref() {
        Some(nodes) if !nodes.trim().is_empty() => RedisTarget::cluster_from_list(nodes),
        _ => RedisTarget::Node(args.redis_url.clone()),
    };
    tracing::info!(redis = %redis, "connecting");
    let engine = CouponEngine::connect(&redis, &args.database_url, args.db_pool_size, config)
        .await
        .context("connecting to Redis and Postgres")?;
    if let Some(risk) = engine.redis_eviction_risk().await {
        tracing::warn!("{risk}");
    }
    for risk in engine.postgres_durability_risks().await {
        tracing::warn!("{risk}");
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(addr = %listener.local_addr()?, persistence = ?args.persistence, variant = %variant.name(), "coupon-server listening");
    if args.reconcile_interval > 0 {
        tokio::spawn(reconcile_loop(
            engine.clone(),
            Duration::from_secs(args.reconcile_interval),
        ));
    }
    let mut state = AppState::new(engine, &args.admin_token, &args.user_token_secret);
    if let Some(service) = &args.service_token {
        state = state.with_service_token(service);
    }
    serve(listener, state, shutdown_signal())
        .await
        .context("serving")?;
    tracing::info!("shut down cleanly");
    Ok(())
}

async fn reconcile_loop(engine: CouponEngine, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match engine.reconcile().await {
            Ok(r) if !r.drift.is_empty() => tracing::warn!(?r, "reconcile found drift"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reconcile failed"),
        }
        if let Err(e) = engine.expire_sweep().await {
            tracing::warn!(error = %e, "expiry sweep failed");
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; draining");
}
