//! Closed-loop load: `clients` tasks, each sending its next claim as soon as the previous
//! answered, for a fixed time; exact latencies of every call. Two drivers of the same shape:
//! the engine in-process (`CouponEngine::claim`) and a minimal HTTP client (one connection
//! per task, written and read by the task itself; see `lean_client`), which is also the
//! generator ceiling the Goose row is compared with.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use coupon_engine::{
    ClaimReceipt, CouponEngine, EngineError, EngineResult,
    domain::ids::{RequestId, UserId},
    http::auth::user_token,
};
use uuid::Uuid;

use super::{
    bench_server::{CLAIMS_PER_USER, SECRET},
    measure::Samples,
};
use crate::lean_client::{Connection, Endpoint};

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

/// Runs `clients` tasks until `run_for` is over; each task owns a state made by `init`
/// (its connection, say) and threads it through its calls, which answer whether the call got
/// the expected answer.
async fn closed_loop<S, I, F, Fut>(clients: usize, run_for: Duration, init: I, call: F) -> Samples
where
    S: Send + 'static,
    I: Fn(usize) -> S,
    F: Fn(S, usize, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (S, bool)> + Send,
{
    let deadline = Instant::now() + run_for;
    let mut set = tokio::task::JoinSet::new();
    for task in 0..clients {
        let call = call.clone();
        let mut state = init(task);
        set.spawn(async move {
            let mut s = Samples::with_capacity(16_384);
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let (next, ok) = call(state, task, i).await;
                state = next;
                if ok {
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

/// The template of call `i` of client `task` out of `clients`: over several, every call a
/// different one in turn, so that no two consecutive claims share one.
fn nth<T>(templates: &[T], clients: usize, task: usize, i: u64) -> usize {
    ((i as usize).wrapping_mul(clients).wrapping_add(task)) % templates.len().max(1)
}

/// `CouponEngine::claim` from `clients` tasks, spread over `templates`.
pub(crate) async fn in_process(
    engine: &CouponEngine,
    templates: Arc<[Uuid]>,
    expect: Expect,
    row: &'static str,
    clients: usize,
    run_for: Duration,
) -> Samples {
    let engine = engine.clone();
    closed_loop(
        clients,
        run_for,
        |_| (),
        move |(), task, i| {
            let engine = engine.clone();
            let template = templates[nth(&templates, clients, task, i)];
            async move {
                let rid = format!("{row}-{task}-{i}");
                let r = claim_as(&engine, template, user(row, task, i), rid).await;
                let ok = match (expect, r) {
                    (Expect::Granted, Ok(r)) => !r.replay,
                    (Expect::SoldOut, Err(EngineError::StockEmpty)) => true,
                    _ => false,
                };
                ((), ok)
            }
        },
    )
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

/// POST /v1/templates/{id}/claims from `clients` tasks, each on a keep-alive connection of
/// its own (see `lean_client`), spread over `templates`.
pub(crate) async fn over_http(
    base_url: &str,
    templates: &[Uuid],
    expect: Expect,
    row: &'static str,
    clients: usize,
    run_for: Duration,
) -> anyhow::Result<Samples> {
    let endpoint = Endpoint::parse(base_url)?;
    let paths: Arc<[String]> = templates
        .iter()
        .map(|t| format!("/v1/templates/{t}/claims"))
        .collect();
    let want = match expect {
        Expect::SoldOut => 409,
        Expect::Granted => 201,
    };
    // A user makes `CLAIMS_PER_USER` calls in a row: its token is signed once, not per call
    // (the client's CPU is taken from the server it measures).
    let init = move |_| (Connection::new(endpoint.clone()), u64::MAX, String::new());
    let run = closed_loop(clients, run_for, init, move |state, task, i| {
        let paths = paths.clone();
        async move {
            let path = &paths[nth(&paths, clients, task, i)];
            let (mut conn, mut signed_for, mut token) = state;
            if signed_for != i / CLAIMS_PER_USER {
                signed_for = i / CLAIMS_PER_USER;
                token = user_token(SECRET.as_bytes(), &user(row, task, i));
            }
            let body = format!("{{\"request_id\":\"{row}-{task}-{i}\"}}");
            let ok = conn
                .post_json(path, &token, &body)
                .await
                .is_ok_and(|status| status == want);
            ((conn, signed_for, token), ok)
        }
    });
    Ok(run.await)
}
