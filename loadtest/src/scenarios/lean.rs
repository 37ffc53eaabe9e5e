//! The scenarios' requests on the lean client's keep-alive connections (one per server),
//! the same records as through reqwest. Two transports use it: the open model's virtual
//! users (`arrivals`; Goose runs a closed loop of users and cannot start a request at a
//! scheduled time whatever the server does — its issue 87, a target request rate, has been
//! open since 2020), and Goose's own users in the closed model, which Goose still schedules,
//! ramps, times and reports on (each answer recorded in its metrics as a custom request),
//! while the request itself skips reqwest: URL parsing, the connection pool's checkout and a
//! task hand-off per call were most of what the harness cost beside the server.

use goose::prelude::*;
use serde_json::Value;
use tokio::time::Instant;

use super::{
    Ctx,
    call::{Req, Resp, Transport, goose_success},
};
use crate::lean_client::{Connection, Endpoint};

/// One virtual user's connections, by server index (opened on first use).
#[derive(Clone)]
pub(crate) struct LeanUser {
    connections: Vec<Connection>,
}

impl LeanUser {
    pub(crate) fn new(endpoints: &[Endpoint]) -> Self {
        Self {
            connections: endpoints.iter().cloned().map(Connection::new).collect(),
        }
    }
}

/// The HTTP method's name (None for Goose's non-HTTP `Custom`, which no scenario sends).
pub(crate) fn method_name(method: GooseMethod) -> Option<&'static str> {
    Some(match method {
        GooseMethod::Delete => "DELETE",
        GooseMethod::Get => "GET",
        GooseMethod::Head => "HEAD",
        GooseMethod::Patch => "PATCH",
        GooseMethod::Post => "POST",
        GooseMethod::Put => "PUT",
        GooseMethod::Custom => return None,
    })
}

impl Transport for LeanUser {
    async fn send(&mut self, ctx: &Ctx, req: &Req<'_>) -> Result<Resp, Box<TransactionError>> {
        let (server, _) = ctx.servers.pick(req.who.home);
        self.send_to(server, ctx, req).await
    }
}

impl LeanUser {
    /// Sends `req` to server `server`, whatever the run's spread says.
    async fn send_to(
        &mut self,
        server: usize,
        ctx: &Ctx,
        req: &Req<'_>,
    ) -> Result<Resp, Box<TransactionError>> {
        let body = req.body.as_ref().map(Value::to_string);
        let token = req.bearer.unwrap_or(&req.who.token);
        let started = Instant::now();
        let answer = match (self.connections.get_mut(server), method_name(req.method)) {
            (Some(conn), Some(method)) => {
                conn.request(method, &req.path, token, body.as_deref(), ctx.timeout)
                    .await
            }
            (None, _) => Err(anyhow::anyhow!("no server {server}")),
            (_, None) => Err(anyhow::anyhow!("a non-HTTP method")),
        };
        let (status, body, error) = match answer {
            Ok((status, bytes)) => (
                Some(status),
                serde_json::from_slice(bytes).unwrap_or(Value::Null),
                None,
            ),
            Err(e) => (None, Value::Null, Some(format!("{e:#}"))),
        };
        Ok(Resp::new(ctx, started, status, body, error, server))
    }
}

/// A lean user whose every request goes to one server (a probe of that server).
pub(crate) struct Pinned {
    pub lean: LeanUser,
    pub server: usize,
}

impl Transport for Pinned {
    async fn send(&mut self, ctx: &Ctx, req: &Req<'_>) -> Result<Resp, Box<TransactionError>> {
        self.lean.send_to(self.server, ctx, req).await
    }
}

/// A Goose user whose requests go over its own lean connections.
pub(crate) struct GooseLean<'a> {
    pub user: &'a mut GooseUser,
    pub lean: &'a mut LeanUser,
}

impl Transport for GooseLean<'_> {
    async fn send(&mut self, ctx: &Ctx, req: &Req<'_>) -> Result<Resp, Box<TransactionError>> {
        let resp = self.lean.send(ctx, req).await?;
        let (success, error) = goose_success(req, &resp);
        self.user
            .record_custom_request_duration(
                method_name(req.method).unwrap_or("CUSTOM"),
                req.op.name(),
                std::time::Duration::from_micros(resp.latency_us),
                success,
                resp.status,
                error.as_deref(),
            )
            .await?;
        Ok(resp)
    }
}
