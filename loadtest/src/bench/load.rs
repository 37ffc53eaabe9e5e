//! Closed-loop load: `clients` tasks, each sending its next claim as soon as the previous
//! answered, for a fixed time; exact latencies of every call. Two drivers of the same shape:
//! the engine in-process (`CouponEngine::claim`) and a minimal HTTP client (one reqwest
//! client, no bookkeeping beyond the latency), which is also the generator ceiling the Goose
//! row is compared with.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use coupon_engine::{
    ClaimReceipt, CouponEngine, EngineError, EngineResult,
    domain::ids::{RequestId, UserId},
    http::auth::user_token,
};
use reqwest::StatusCode;
use uuid::Uuid;

use super::{
    measure::Samples,
    target::{CLAIMS_PER_USER, SECRET},
};

/// Which answer a row expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// 409 `stock_empty` (the flood after a sale sold out).
    SoldOut,
    /// 201 with a new coupon.
    Granted,
}

/// The bench user for call `i` of client `task` of row `row`.
fn user(row: &str, task: usize, i: u64) -> String {
    format!("b{row}-{task}-{}", i / CLAIMS_PER_USER)
}

async fn closed_loop<F, Fut>(clients: usize, run_for: Duration, call: F) -> Samples
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let deadline = Instant::now() + run_for;
    let mut set = tokio::task::JoinSet::new();
    for task in 0..clients {
        let call = call.clone();
        set.spawn(async move {
            let mut s = Samples::with_capacity(16_384);
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                if call(task, i).await {
                    s.push(t0.elapsed());
                } else {
                    s.errors += 1;
                }
                i += 1;
            }
            s
        });
    }
    let mut all = Samples::default();
    while let Some(done) = set.join_next().await {
        if let Ok(s) = done {
            all.merge(s);
        }
    }
    all
}

/// `CouponEngine::claim` from `clients` tasks.
pub(crate) async fn in_process(
    engine: &CouponEngine,
    template: Uuid,
    expect: Expect,
    row: &'static str,
    clients: usize,
    run_for: Duration,
) -> Samples {
    let engine = engine.clone();
    closed_loop(clients, run_for, move |task, i| {
        let engine = engine.clone();
        async move {
            let rid = format!("{row}-{task}-{i}");
            let r = claim_as(&engine, template, user(row, task, i), rid).await;
            match (expect, r) {
                (Expect::Granted, Ok(r)) => !r.replay,
                (Expect::SoldOut, Err(EngineError::StockEmpty)) => true,
                _ => false,
            }
        }
    })
    .await
}

/// A claim with its ids parsed as the HTTP layer parses them, so a bad id fails the call
/// as it fails a request.
async fn claim_as(
    engine: &CouponEngine,
    template: Uuid,
    user: String,
    request_id: String,
) -> EngineResult<ClaimReceipt> {
    let (user, request_id) = (UserId::parse(user)?, RequestId::parse(request_id)?);
    engine.claim(template.into(), &user, &request_id).await
}

/// POST /v1/templates/{id}/claims from `clients` tasks sharing one HTTP client.
pub(crate) async fn over_http(
    base_url: &str,
    template: Uuid,
    expect: Expect,
    row: &'static str,
    clients: usize,
    run_for: Duration,
) -> anyhow::Result<Samples> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .timeout(Duration::from_secs(10))
        .build()?;
    let url: std::sync::Arc<str> = format!("{base_url}/v1/templates/{template}/claims").into();
    let want = match expect {
        Expect::SoldOut => StatusCode::CONFLICT,
        Expect::Granted => StatusCode::CREATED,
    };
    Ok(closed_loop(clients, run_for, move |task, i| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let token = user_token(SECRET.as_bytes(), &user(row, task, i));
            let body = format!("{{\"request_id\":\"{row}-{task}-{i}\"}}");
            let sent = http
                .post(&*url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            match sent {
                Ok(resp) => {
                    let ok = resp.status() == want;
                    // Read the body so the connection goes back to the pool.
                    let _ = resp.bytes().await;
                    ok
                }
                Err(_) => false,
            }
        }
    })
    .await)
}
