//! A plain HTTP client of the coupon API for everything outside the load itself: health,
//! seeding templates, minting user tokens, audits, reconcile and reading wallets afterwards.

use std::time::Duration;

use anyhow::{Context, bail};
use coupon_engine::{AuditReport, Coupon, Discount, NewTemplate, RefundPolicy, StaleAdmissions};
use reqwest::Method;
use serde::{Deserialize, de::DeserializeOwned};
use uuid::Uuid;

/// The API at one base URL, with the admin token.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    admin_token: String,
}

/// The fields of a created template the runner needs.
#[derive(Debug, Deserialize)]
struct Created {
    id: Uuid,
}

/// The fields of a stored template the runner needs.
#[derive(Debug, Deserialize)]
pub(crate) struct Fetched {
    /// Id.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// Total stock.
    pub total_stock: i64,
    /// Per-user limit.
    pub per_user_limit: i32,
    /// Refund policy.
    pub refund_policy: RefundPolicy,
    /// Discount.
    pub discount: Discount,
}

/// A minted token.
#[derive(Debug, Deserialize)]
struct Token {
    token: String,
}

impl Api {
    /// A client of `base` (no trailing slash) with `admin_token`.
    pub(crate) fn new(base: &str, admin_token: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(32)
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            admin_token: admin_token.to_owned(),
        })
    }

    async fn read<T: DeserializeOwned>(
        what: &str,
        response: reqwest::Response,
    ) -> anyhow::Result<T> {
        let status = response.status();
        let body = response
            .text()
            .await
            .with_context(|| format!("{what}: reading the body"))?;
        if !status.is_success() {
            bail!("{what}: HTTP {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("{what}: unexpected body {body}"))
    }

    /// `GET /healthz`, retried for up to `wait`.
    pub(crate) async fn wait_healthy(&self, wait: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let attempt = self.http.get(format!("{}/healthz", self.base)).send().await;
            let last = match attempt {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => format!("HTTP {}", r.status()),
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{}/healthz did not answer 200 within {wait:?}: {last}",
                    self.base
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One call of the API, read as `T`: a non-2xx status is an error with the body.
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<T> {
        let what = format!("{method} {path}");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let r = request.send().await.with_context(|| what.clone())?;
        Self::read(&what, r).await
    }

    /// `POST /v1/templates` (admin); the new template's id.
    pub(crate) async fn create_template(&self, spec: &NewTemplate) -> anyhow::Result<Uuid> {
        let body = serde_json::to_value(spec).context("encoding the template")?;
        let admin = Some(self.admin_token.as_str());
        let created: Created = self
            .call(Method::POST, "/v1/templates", admin, Some(&body))
            .await?;
        Ok(created.id)
    }

    /// `GET /v1/templates/{id}`: an existing template.
    pub(crate) async fn template(&self, id: Uuid) -> anyhow::Result<Fetched> {
        let path = format!("/v1/templates/{id}");
        self.call(Method::GET, &path, None, None).await
    }

    /// `POST /v1/admin/user-tokens` (admin): the bearer token of `user_id`.
    pub(crate) async fn mint_token(&self, user_id: &str) -> anyhow::Result<String> {
        let body = serde_json::json!({ "user_id": user_id });
        let admin = Some(self.admin_token.as_str());
        let t: Token = self
            .call(Method::POST, "/v1/admin/user-tokens", admin, Some(&body))
            .await?;
        Ok(t.token)
    }

    /// `GET /v1/admin/templates/{id}/audit` (admin): invariants I1–I5 of one template.
    pub(crate) async fn audit(&self, template: Uuid) -> anyhow::Result<AuditReport> {
        let path = format!("/v1/admin/templates/{template}/audit");
        let admin = Some(self.admin_token.as_str());
        self.call(Method::GET, &path, admin, None).await
    }

    /// `POST /v1/admin/reconcile` (admin): persists stale intents, applies the outbox.
    pub(crate) async fn reconcile(&self) -> anyhow::Result<()> {
        let admin = Some(self.admin_token.as_str());
        let _: serde_json::Value = self
            .call(Method::POST, "/v1/admin/reconcile", admin, None)
            .await?;
        Ok(())
    }

    /// `GET /v1/users/me/coupons` with a user's token: everything the user holds.
    pub(crate) async fn wallet(&self, token: &str) -> anyhow::Result<Vec<Coupon>> {
        self.call(Method::GET, "/v1/users/me/coupons", Some(token), None)
            .await
    }

    /// `GET /metrics`: the server's sync claims that Redis admitted and Postgres refused
    /// since it started (None: the server does not export them).
    pub(crate) async fn stale_admissions(&self) -> anyhow::Result<Option<StaleAdmissions>> {
        let what = format!("GET {}/metrics", self.base);
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .with_context(|| what.clone())?
            .error_for_status()
            .with_context(|| what.clone())?
            .text()
            .await
            .with_context(|| format!("{what}: reading the body"))?;
        Ok(parse_stale_admissions(&text))
    }
}

/// The `coupon_sync_stale_admissions_total` series of a Prometheus text page.
fn parse_stale_admissions(metrics: &str) -> Option<StaleAdmissions> {
    let mut found = None::<StaleAdmissions>;
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("coupon_sync_stale_admissions_total{reason=\"") else {
            continue;
        };
        let Some((reason, value)) = rest.split_once("\"} ") else {
            continue;
        };
        let Ok(n) = value.trim().parse::<f64>() else {
            continue;
        };
        let counts = found.get_or_insert_with(StaleAdmissions::default);
        match reason {
            "stock_empty" => counts.stock_empty = n as u64,
            "user_limit" => counts.user_limit = n as u64,
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_admissions_are_read_from_the_metrics_page() {
        let page = "# HELP coupon_sync_stale_admissions_total …\n\
                    # TYPE coupon_sync_stale_admissions_total counter\n\
                    coupon_sync_stale_admissions_total{reason=\"stock_empty\"} 7\n\
                    coupon_sync_stale_admissions_total{reason=\"user_limit\"} 2\n\
                    coupon_async_acks_refused_total 5\n";
        assert_eq!(
            parse_stale_admissions(page),
            Some(StaleAdmissions {
                stock_empty: 7,
                user_limit: 2
            })
        );
        assert_eq!(
            parse_stale_admissions("coupon_async_acks_refused_total 0\n"),
            None
        );
    }
}
