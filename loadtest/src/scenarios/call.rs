//! One HTTP request, through whoever sends it ([`Transport`]): a Goose user in the closed
//! model, a lean client in the open one (`arrivals`). Through Goose: bearer token, JSON
//! body, a stable request name, our own timing (body included), and Goose's success flag
//! set by what the answer means:
//! expected business refusals (`stock_empty`, `user_limit`, a clash's `already_used`, a
//! cross-user `not_owner`) count as success; 5xx and timeouts as failures; a 2xx to a
//! cross-user request as a failure.

use goose::{goose::GooseResponse, prelude::*};
use serde_json::Value;
use tokio::time::Instant;

use super::Ctx;
use crate::{acks::RequestKind, setup::Customer};

/// A request to send.
pub(crate) struct Req<'a> {
    /// What it is (names it).
    pub op: RequestKind,
    /// HTTP method.
    pub method: GooseMethod,
    /// Path, joined to the base URL of the server the request goes to.
    pub path: String,
    /// The sender (its token, and its home server).
    pub who: &'a Customer,
    /// Another bearer token to send instead of the sender's (the order service's).
    pub bearer: Option<&'a str>,
    /// JSON body.
    pub body: Option<Value>,
    /// Refusal codes that are the expected outcome here.
    pub expected: &'a [&'a str],
}

/// What came back.
#[derive(Debug, Clone)]
pub(crate) struct Resp {
    /// HTTP status (None: timeout or transport error).
    pub status: Option<u16>,
    /// Parsed JSON body (Null when absent or unreadable).
    pub body: Value,
    /// Error code of an error body.
    pub code: Option<String>,
    /// Transport error text.
    pub error: Option<String>,
    /// Start, µs since the load began.
    pub start_us: u64,
    /// Latency, µs.
    pub latency_us: u64,
    /// Index of the server that answered (or did not).
    pub server: usize,
}

impl Resp {
    /// The answer to a request sent at `started` (now is its end), with the error body's
    /// code picked out.
    pub(crate) fn new(
        ctx: &Ctx,
        started: Instant,
        status: Option<u16>,
        body: Value,
        error: Option<String>,
        server: usize,
    ) -> Self {
        let latency_us = started.elapsed().as_micros() as u64;
        let code = body
            .pointer("/error/code")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Self {
            status,
            body,
            code,
            error,
            start_us: ctx.micros_since_start(started),
            latency_us,
            server,
        }
    }

    /// Whether trying again with the same ids makes sense (unknown outcome or busy).
    pub(crate) fn retryable(&self) -> bool {
        match self.status {
            None => true,
            Some(s) => s >= 500 || s == 429 || s == 408,
        }
    }

    /// Whether the answer is a 2xx.
    pub(crate) fn ok(&self) -> bool {
        matches!(self.status, Some(s) if (200..300).contains(&s))
    }
}

/// Whoever sends the scenarios' requests. The scenarios are written once against it, so the
/// same shopper journeys, records and audits serve the closed model (Goose users) and the
/// open one (arrivals on lean connections).
pub(crate) trait Transport: Send {
    /// Sends `req` once; a transport failure is an answer with no status, never an `Err`
    /// (which only Goose's own errors are).
    fn send(
        &mut self,
        ctx: &Ctx,
        req: &Req<'_>,
    ) -> impl Future<Output = Result<Resp, Box<TransactionError>>> + Send;
}

impl Transport for GooseUser {
    async fn send(&mut self, ctx: &Ctx, req: &Req<'_>) -> Result<Resp, Box<TransactionError>> {
        send_through_goose(self, ctx, req).await
    }
}

/// Sends `req` once through Goose.
async fn send_through_goose(
    user: &mut GooseUser,
    ctx: &Ctx,
    req: &Req<'_>,
) -> Result<Resp, Box<TransactionError>> {
    let (server, base) = ctx.servers.pick(req.who.home);
    // A full URL: Goose uses it as it is instead of joining the path to its one host.
    let url = format!("{base}{}", req.path);
    let builder = user
        .get_request_builder(&req.method, &url)?
        .bearer_auth(req.bearer.unwrap_or(&req.who.token))
        .timeout(ctx.timeout);
    let builder = match &req.body {
        Some(body) => builder.json(body),
        None => builder,
    };
    let goose_request = GooseRequest::builder()
        .method(req.method)
        .path(url.as_str())
        .name(req.op.name())
        .set_request_builder(builder)
        .build();
    let started = Instant::now();
    let GooseResponse {
        mut request,
        response,
    } = user.request(goose_request).await?;
    let (status, body, error) = match response {
        Ok(r) => {
            let status = r.status().as_u16();
            match r.text().await {
                Ok(text) => (
                    Some(status),
                    serde_json::from_str(&text).unwrap_or(Value::Null),
                    None,
                ),
                // The status arrived but the body did not: the outcome is unknown.
                Err(e) => (None, Value::Null, Some(format!("reading the body: {e}"))),
            }
        }
        Err(e) => (None, Value::Null, Some(e.to_string())),
    };
    let resp = Resp::new(ctx, started, status, body, error, server);
    // Goose marks 2xx success and everything else failure; correct it where the answer
    // means something else. `set_failure` returns an error to end the transaction early,
    // which is not wanted here: the failure is recorded, the user carries on.
    match goose_success(req, &resp) {
        (false, Some(why)) if request.success || resp.ok() => {
            let _ = user.set_failure(&why, &mut request, None, None);
        }
        (true, _) if !request.success => {
            // Without the error text the correction is not counted as a second error.
            request.error.clear();
            user.set_success(&mut request)?;
        }
        _ => {}
    }
    Ok(resp)
}

/// Whether Goose should count the answer a success, and why not: expected business
/// refusals (`stock_empty`, `user_limit`, a clash's `already_used`, a cross-user
/// `not_owner`) succeed; 5xx, timeouts and unreadable answers fail; a 2xx to a cross-user
/// request fails.
pub(crate) fn goose_success(req: &Req<'_>, resp: &Resp) -> (bool, Option<String>) {
    let expected_refusal = matches!(resp.status, Some(s) if (400..500).contains(&s))
        && resp
            .code
            .as_deref()
            .is_some_and(|c| req.expected.contains(&c));
    if resp.ok() && req.op.cross_user() {
        (
            false,
            Some("cross-user request succeeded (authz violation)".into()),
        )
    } else if resp.ok() || expected_refusal {
        (true, None)
    } else if resp.status.is_none() {
        (
            false,
            Some(
                resp.error
                    .clone()
                    .unwrap_or_else(|| "no readable answer".into()),
            ),
        )
    } else {
        (false, Some(format!("{:?} {:?}", resp.status, resp.code)))
    }
}
