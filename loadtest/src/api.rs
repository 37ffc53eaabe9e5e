//! A plain HTTP client of the coupon API for everything outside the load itself: health,
//! seeding templates, minting user tokens, audits, reconcile and reading wallets afterwards.

use std::time::Duration;

use anyhow::{Context, bail};
use coupon_engine::{AuditReport, Coupon, Discount, NewTemplate, RefundPolicy};
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

    /// `POST /v1/templates` (admin); the new template's id.
    pub(crate) async fn create_template(&self, spec: &NewTemplate) -> anyhow::Result<Uuid> {
        let r = self
            .http
            .post(format!("{}/v1/templates", self.base))
            .bearer_auth(&self.admin_token)
            .json(spec)
            .send()
            .await
            .context("POST /v1/templates")?;
        let created: Created = Self::read("POST /v1/templates", r).await?;
        Ok(created.id)
    }

    /// `GET /v1/templates/{id}`: an existing template.
    pub(crate) async fn template(&self, id: Uuid) -> anyhow::Result<Fetched> {
        let path = format!("/v1/templates/{id}");
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        Self::read(&format!("GET {path}"), r).await
    }

    /// `POST /v1/admin/user-tokens` (admin): the bearer token of `user_id`.
    pub(crate) async fn mint_token(&self, user_id: &str) -> anyhow::Result<String> {
        let r = self
            .http
            .post(format!("{}/v1/admin/user-tokens", self.base))
            .bearer_auth(&self.admin_token)
            .json(&serde_json::json!({ "user_id": user_id }))
            .send()
            .await
            .context("POST /v1/admin/user-tokens")?;
        let t: Token = Self::read("POST /v1/admin/user-tokens", r).await?;
        Ok(t.token)
    }

    /// `GET /v1/admin/templates/{id}/audit` (admin): invariants I1–I5 of one template.
    pub(crate) async fn audit(&self, template: Uuid) -> anyhow::Result<AuditReport> {
        let path = format!("/v1/admin/templates/{template}/audit");
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.admin_token)
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        Self::read(&format!("GET {path}"), r).await
    }

    /// `POST /v1/admin/reconcile` (admin): persists stale intents, applies the outbox.
    pub(crate) async fn reconcile(&self) -> anyhow::Result<()> {
        let r = self
            .http
            .post(format!("{}/v1/admin/reconcile", self.base))
            .bearer_auth(&self.admin_token)
            .send()
            .await
            .context("POST /v1/admin/reconcile")?;
        let _: serde_json::Value = Self::read("POST /v1/admin/reconcile", r).await?;
        Ok(())
    }

    /// `GET /v1/users/me/coupons` with a user's token: everything the user holds.
    pub(crate) async fn wallet(&self, token: &str) -> anyhow::Result<Vec<Coupon>> {
        let r = self
            .http
            .get(format!("{}/v1/users/me/coupons", self.base))
            .bearer_auth(token)
            .send()
            .await
            .context("GET /v1/users/me/coupons")?;
        Self::read("GET /v1/users/me/coupons", r).await
    }
}
