//! Grey failures (docs/ARCHITECTURE.md, "Deadlines"): a store that stops answering without
//! closing anything. Each test runs its own Redis and Postgres behind fault proxies
//! (`coupon_testkit::fault_proxy`), never the shared ones, and serves the API in-process.
//! A claim must answer 503 within the deadline, `/healthz` must name the store, and once the
//! link heals claims must be granted again within 2 s, with nothing oversold or lost.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use coupon_engine::{
    DEFAULT_DEADLINE, EngineConfig, NewTemplate, ReconcileOptions, RefundPolicy,
    domain::ids::TemplateId,
    http::{AppState, auth::user_token},
    service::PROBE_LIMIT,
};
use coupon_testkit::{
    Backends, SpawnedServer, TestEnv,
    fault_proxy::{FaultProxy, LinkMode},
    local::LocalPostgres,
    redis_server::LocalRedis,
    spawn_server,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ADMIN: &str = "grey-admin";
const SECRET: &str = "grey-secret";
/// What a loaded machine may add to a bound before the answer reaches the client.
const SLACK: Duration = Duration::from_millis(750);
/// How soon after the heal a claim must be granted again (the bound).
const RECOVERY: Duration = Duration::from_secs(2);

struct Grey {
    base: String,
    http: reqwest::Client,
    env: TestEnv,
    template: TemplateId,
    pg_link: FaultProxy,
    redis_link: FaultProxy,
    _server: SpawnedServer,
    _stores: (LocalPostgres, LocalRedis),
}

async fn grey() -> anyhow::Result<Grey> {
    let (pg, redis) = tokio::task::spawn_blocking(|| {
        Ok::<_, anyhow::Error>((LocalPostgres::start()?, LocalRedis::start()?))
    })
    .await??;
    let (pg_link, pg_url) = FaultProxy::for_url(&pg.url())?;
    let (redis_link, redis_url) = FaultProxy::for_url(&redis.url())?;
    let backends = Arc::new(Backends::with_urls(redis_url, pg_url, None));
    let env = TestEnv::on(backends, EngineConfig::default()).await?;
    let t = env
        .engine
        .create_template(NewTemplate::simple(
            "grey",
            1000,
            1,
            RefundPolicy::ReturnToStock,
        ))
        .await?;
    let server = spawn_server(AppState::new(env.engine.clone(), ADMIN, SECRET)).await?;
    Ok(Grey {
        base: server.base_url(),
        // Far above every bound under test: a hang fails the test instead of stalling it.
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
        env,
        template: t.id,
        pg_link,
        redis_link,
        _server: server,
        _stores: (pg, redis),
    })
}

impl Grey {
    async fn claim(&self, who: &str, rid: &str) -> (StatusCode, Value, Duration) {
        let started = Instant::now();
        let resp = self
            .http
            .post(format!(
                "{}/v1/templates/{}/claims",
                self.base, self.template
            ))
            .bearer_auth(user_token(SECRET.as_bytes(), who))
            .json(&json!({"request_id": rid}))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.json().await.unwrap_or(Value::Null);
        (status, body, started.elapsed())
    }

    async fn health(&self) -> (StatusCode, Value, Duration) {
        let started = Instant::now();
        let resp = self
            .http
            .get(format!("{}/healthz", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.json().await.unwrap_or(Value::Null);
        (status, body, started.elapsed())
    }

    /// Claims with new shoppers until one is granted; how long it took from now.
    async fn granted_again(&self, tag: &str) -> Duration {
        let healed = Instant::now();
        for n in 0.. {
            let who = format!("{tag}-{n}");
            let (status, body, _) = self.claim(&who, &who).await;
            if status == StatusCode::CREATED {
                return healed.elapsed();
            }
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert!(
                healed.elapsed() < Duration::from_secs(30),
                "no claim granted within 30 s"
            );
        }
        unreachable!()
    }

    /// Settles what the fault left in flight, then audits: nothing oversold, nothing lost.
    async fn settled_and_audited(&self) -> anyhow::Result<()> {
        let e = &self.env.engine;
        e.reconcile_with(ReconcileOptions {
            min_pending_age: Duration::ZERO,
        })
        .await?;
        let audit = e.audit(self.template).await?;
        assert!(audit.ok(), "{audit:?}");
        Ok(())
    }
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or("<none>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_postgres_gets_a_503_within_the_deadline_and_recovers() -> anyhow::Result<()> {
    let g = grey().await?;
    let (status, body, _) = g.claim("before", "before").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    g.pg_link.set(LinkMode::Blackhole);
    let (status, body, took) = g.claim("during", "during").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        took <= DEFAULT_DEADLINE + SLACK,
        "the claim took {took:?}, past the {DEFAULT_DEADLINE:?} deadline"
    );
    let (status, body, took) = g.health().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(message(&body).contains("postgres is down"), "{body}");
    assert!(!message(&body).contains("redis is down"), "{body}");
    assert!(took <= PROBE_LIMIT + SLACK, "/healthz took {took:?}");

    g.pg_link.set(LinkMode::Pass);
    let recovered = g.granted_again("after").await;
    assert!(
        recovered <= RECOVERY,
        "the first claim after the heal was granted {recovered:?} after it"
    );
    let (status, body, _) = g.health().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The claim whose outcome was unknown: its retry answers for good, once.
    let (status, body, _) = g.claim("during", "during").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    g.settled_and_audited().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_redis_gets_a_503_within_the_deadline_and_recovers() -> anyhow::Result<()> {
    let g = grey().await?;
    let (status, body, _) = g.claim("before", "before").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    g.redis_link.set(LinkMode::Blackhole);
    let (status, body, took) = g.claim("during", "during").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        took <= DEFAULT_DEADLINE + SLACK,
        "the claim took {took:?}, past the {DEFAULT_DEADLINE:?} deadline"
    );
    let (status, body, took) = g.health().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(message(&body).contains("redis is down"), "{body}");
    assert!(!message(&body).contains("postgres is down"), "{body}");
    assert!(took <= PROBE_LIMIT + SLACK, "/healthz took {took:?}");

    g.redis_link.set(LinkMode::Pass);
    let recovered = g.granted_again("after").await;
    assert!(
        recovered <= RECOVERY,
        "the first claim after the heal was granted {recovered:?} after it"
    );
    let (status, body, _) = g.claim("during", "during").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    g.settled_and_audited().await
}

/// Connections reset (a store restarted, a balancer that drops them): an answer at once,
/// never a hang, and the sale goes on once they are accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_links_answer_at_once_and_recover() -> anyhow::Result<()> {
    let g = grey().await?;
    let (status, body, _) = g.claim("before", "before").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    g.pg_link.set(LinkMode::Reset);
    let (status, body, took) = g.claim("during", "during").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(took <= DEFAULT_DEADLINE + SLACK, "the claim took {took:?}");
    g.pg_link.set(LinkMode::Pass);
    let recovered = g.granted_again("after").await;
    assert!(
        recovered <= RECOVERY,
        "granted again {recovered:?} after the heal"
    );
    g.settled_and_audited().await
}

/// Latency under the deadline is only slowness: claims are still granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_postgres_link_still_grants() -> anyhow::Result<()> {
    let g = grey().await?;
    g.pg_link.set(LinkMode::Latency(Duration::from_millis(100)));
    for n in 0..3 {
        let who = format!("slow-{n}");
        let (status, body, _) = g.claim(&who, &who).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    g.pg_link.set(LinkMode::Pass);
    g.settled_and_audited().await
}

/// A batch stuck on a connection whose peer is gone for good (no heal will deliver its bytes)
/// must not hold the template: it is abandoned at the deadline, and the next claim runs on a
/// fresh connection. Without the abandon every later claim of the template queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stuck_on_a_dead_connection_does_not_hold_the_template() -> anyhow::Result<()> {
    let g = grey().await?;
    let (status, body, _) = g.claim("before", "before").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    g.pg_link.strand_open_connections();
    let (status, body, took) = g.claim("stuck", "stuck").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(took <= DEFAULT_DEADLINE + SLACK, "the claim took {took:?}");
    let recovered = g.granted_again("after").await;
    assert!(
        recovered <= RECOVERY,
        "the first claim after the stuck batch was granted {recovered:?} after it"
    );
    Ok(())
}

/// A `BEGIN` cancelled in flight (a deadline that fires while Postgres is slow or paused)
/// can leave the session inside a transaction sqlx 0.9 does not count
/// (transact-rs/sqlx#4393), and the pool then hands that connection to the next borrower,
/// whose statements are never committed: a claim batch decided there is answered `stored`
/// and lost. The property tests lost one acknowledged claim that way under a paused
/// Postgres (I6, once, not replayable). Here the state itself is made — a `BEGIN` the pool
/// does not know of — and the engine's pools must close that connection on its release, so
/// the next borrower's write is durable.
#[tokio::test]
async fn a_connection_left_inside_a_transaction_is_not_handed_out_again() -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let direct = sqlx::PgPool::connect(&env.database_url).await?;
    sqlx::query("CREATE TABLE leak_probe (n int)")
        .execute(&direct)
        .await?;
    // One connection, so the next borrower gets the same one back if it is kept.
    let pool = coupon_engine::store::postgres::pool_options(1)
        .connect(&env.database_url)
        .await?;
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql("BEGIN").execute(&mut *conn).await?;
    drop(conn);
    let mut conn = pool.acquire().await?;
    sqlx::query("INSERT INTO leak_probe VALUES (1)")
        .execute(&mut *conn)
        .await?;
    drop(conn);
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM leak_probe")
        .fetch_one(&direct)
        .await?;
    assert_eq!(
        seen, 1,
        "the write went into a transaction left open, never committed"
    );
    pool.close().await;
    direct.close().await;
    Ok(())
}
