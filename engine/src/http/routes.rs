//! Route handlers: authenticate, translate JSON to engine calls and back, record metrics.

use std::time::Instant;

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::Serialize;

use super::{
    AppState,
    auth::{Admin, User, user_token},
    dto::*,
    error::ApiError,
    extract::{ApiJson, IdPath},
};
use crate::{
    AuditReport, Coupon, NewTemplate, ReconcileReport, Template, domain::ids::validate_user_id,
};

/// Every route of the API.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/templates", post(create_template))
        .route("/v1/templates/{id}", get(get_template))
        .route("/v1/templates/{id}/claims", post(claim))
        .route("/v1/coupons/{id}/redeem", post(redeem))
        .route("/v1/coupons/{id}/refund", post(refund))
        .route("/v1/users/me/coupons", get(my_coupons))
        .route("/v1/admin/templates/{id}/audit", get(audit))
        .route("/v1/admin/reconcile", post(reconcile))
        .route("/v1/admin/user-tokens", post(mint_token))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(super::openapi::serve))
        .fallback(|| async { ApiError::no_route() })
}

/// Runs a handler body, records its latency under `route` and its outcome, and answers.
async fn timed<T: Serialize>(
    state: &AppState,
    route: &'static str,
    ok: StatusCode,
    body: impl Future<Output = Result<T, ApiError>>,
) -> Response {
    let start = Instant::now();
    let result = body.await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.code(),
    };
    state.metrics.observe(route, outcome, start.elapsed());
    match result {
        Ok(v) => (ok, Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Template with its live remaining stock.
#[derive(Serialize)]
struct TemplateView {
    #[serde(flatten)]
    template: Template,
    remaining_stock: Option<i64>,
}

#[utoipa::path(post, path = "/v1/templates", tag = "admin",
    request_body(content = Object, description = "NewTemplate"),
    responses((status = 201, description = "Created template"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("admin" = [])))]
async fn create_template(
    State(s): State<AppState>,
    _: Admin,
    ApiJson(spec): ApiJson<NewTemplate>,
) -> Response {
    timed(&s, "create_template", StatusCode::CREATED, async {
        let t = s.engine.create_template(spec).await?;
        let remaining_stock = s.engine.remaining_stock(t.id).await?;
        Ok(TemplateView {
            template: t,
            remaining_stock,
        })
    })
    .await
}

#[utoipa::path(get, path = "/v1/templates/{id}", params(("id" = Uuid, Path)),
    responses((status = 200, description = "Template with remaining_stock"), (status = 404, body = ErrorBody)))]
async fn get_template(State(s): State<AppState>, IdPath(id): IdPath) -> Response {
    timed(&s, "get_template", StatusCode::OK, async {
        let t = s.engine.template(id).await?;
        let remaining_stock = s.engine.remaining_stock(id).await?;
        Ok(TemplateView {
            template: (*t).clone(),
            remaining_stock,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/templates/{id}/claims", params(("id" = Uuid, Path)),
    request_body = ClaimRequest,
    responses((status = 201, body = ClaimResponse), (status = 409, body = ErrorBody, description = "stock_empty, user_limit, invalid_state"),
              (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("user" = [])))]
async fn claim(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    User(user): User,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Response {
    timed(&s, "claim", StatusCode::CREATED, async {
        let r = s.engine.claim(id, &user, &req.request_id).await?;
        Ok(ClaimResponse {
            coupon_id: r.coupon_id,
            template_id: r.template_id,
            remaining_stock: r.remaining_stock,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/coupons/{id}/redeem", params(("id" = Uuid, Path)),
    request_body = RedeemRequest,
    responses((status = 200, body = RedeemResponse), (status = 409, body = ErrorBody, description = "already_used, expired, below_min_amount, invalid_state"),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody, description = "busy")),
    security(("user" = [])))]
async fn redeem(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    User(user): User,
    ApiJson(req): ApiJson<RedeemRequest>,
) -> Response {
    timed(&s, "redeem", StatusCode::OK, async {
        let r = s
            .engine
            .redeem(id, &user, &req.order_id, req.order_amount)
            .await?;
        Ok(RedeemResponse {
            coupon_id: r.coupon_id,
            order_id: r.order_id,
            discount: r.discount,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/coupons/{id}/refund", params(("id" = Uuid, Path)),
    request_body = RefundRequest,
    responses((status = 200, body = RefundResponse), (status = 409, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("user" = [])))]
async fn refund(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    User(user): User,
    ApiJson(req): ApiJson<RefundRequest>,
) -> Response {
    timed(&s, "refund", StatusCode::OK, async {
        let r = s.engine.refund(id, &user, &req.order_id).await?;
        Ok(RefundResponse {
            coupon_id: r.coupon_id,
            status: r.status.as_str().to_owned(),
        })
    })
    .await
}

#[utoipa::path(get, path = "/v1/users/me/coupons",
    responses((status = 200, description = "The caller's coupons, newest first"), (status = 401, body = ErrorBody)),
    security(("user" = [])))]
async fn my_coupons(State(s): State<AppState>, User(user): User) -> Response {
    timed(&s, "my_coupons", StatusCode::OK, async {
        let coupons: Vec<Coupon> = s.engine.user_coupons(&user).await?;
        Ok(coupons)
    })
    .await
}

/// Audit report with its verdict.
#[derive(Serialize)]
struct AuditView {
    ok: bool,
    #[serde(flatten)]
    report: AuditReport,
}

#[utoipa::path(get, path = "/v1/admin/templates/{id}/audit", tag = "admin", params(("id" = Uuid, Path)),
    responses((status = 200, description = "Invariant report I1–I5"), (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("admin" = [])))]
async fn audit(State(s): State<AppState>, _: Admin, IdPath(id): IdPath) -> Response {
    timed(&s, "audit", StatusCode::OK, async {
        let report = s.engine.audit(id).await?;
        Ok(AuditView {
            ok: report.ok(),
            report,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/admin/reconcile", tag = "admin",
    responses((status = 200, description = "What the reconciler did"), (status = 401, body = ErrorBody)),
    security(("admin" = [])))]
async fn reconcile(State(s): State<AppState>, _: Admin) -> Response {
    timed(&s, "reconcile", StatusCode::OK, async {
        let r: ReconcileReport = s.engine.reconcile().await?;
        s.engine.expire_sweep().await?;
        Ok(r)
    })
    .await
}

#[utoipa::path(post, path = "/v1/admin/user-tokens", tag = "admin", request_body = TokenRequest,
    responses((status = 200, body = TokenResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("admin" = [])))]
async fn mint_token(
    State(s): State<AppState>,
    _: Admin,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Response {
    timed(&s, "user_token", StatusCode::OK, async {
        validate_user_id(&req.user_id)?;
        Ok(TokenResponse {
            token: user_token(&s.user_secret, &req.user_id),
        })
    })
    .await
}

#[utoipa::path(get, path = "/healthz",
    responses((status = 200, body = Health), (status = 503, body = ErrorBody)))]
async fn health(State(s): State<AppState>) -> Response {
    timed(&s, "healthz", StatusCode::OK, async {
        s.engine.health().await?;
        Ok(Health {
            status: "ok".into(),
        })
    })
    .await
}

#[utoipa::path(get, path = "/metrics",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
async fn metrics(State(s): State<AppState>) -> Response {
    let pending = s.engine.pending_intents().await.ok();
    let mut text = s.metrics.render(pending);
    crate::http::metrics::render_engine(&mut text, &s.engine);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
