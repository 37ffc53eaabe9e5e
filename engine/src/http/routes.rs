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
    auth::{Admin, OrderCaller, User, unix_now, user_token, user_token_until},
    dto::*,
    error::ApiError,
    extract::{ApiJson, IdParam, IdPath},
};
use crate::{
    AuditReport, Coupon, NewTemplate, ReconcileReport, Template,
    domain::ids::{RequestId, TemplateId, UserId},
};

/// Shared response descriptions, so every operation words the same status the same way.
const BAD_REQUEST: &str = "invalid_request: malformed JSON, a wrong content type, a wrong \
    type, a missing or unknown field, a value out of range, or a malformed id; nothing changed";
const BAD_ID: &str = "invalid_request: the id is not a hyphenated UUID";
const ADMIN_UNAUTHORIZED: &str = "unauthorized: missing or invalid admin bearer token";
const USER_UNAUTHORIZED: &str = "unauthorized: missing, invalid or expired user token";
const NOT_FOUND: &str = "not_found: no such template or coupon";
const TOO_LARGE: &str = "payload_too_large: the body is over 16 KiB";
const ORDER_UNAUTHORIZED: &str = "unauthorized: missing or invalid service token, or missing, \
    invalid or expired user token";
const ORDER_FORBIDDEN: &str = "not_owner: the coupon belongs to another user than the one \
    named; forbidden: a user token on a server where the order service alone acts on orders";
const UNAVAILABLE: &str =
    "unavailable: a backend failed; the outcome is unknown, retry with the same ids";

/// The answers every order operation (redeem, refund, lock, release) may give besides its
/// own success and conflicts, declared once so the four cannot drift apart. Only described:
/// the handlers answer through [`ApiError`].
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
enum OrderErrors {
    #[response(status = 400, description = BAD_REQUEST)]
    BadRequest(ErrorBody),
    #[response(status = 401, description = ORDER_UNAUTHORIZED)]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = ORDER_FORBIDDEN)]
    Forbidden(ErrorBody),
    #[response(status = 404, description = NOT_FOUND)]
    NotFound(ErrorBody),
    #[response(status = 413, description = TOO_LARGE)]
    TooLarge(ErrorBody),
    #[response(status = 503, description = UNAVAILABLE)]
    Unavailable(ErrorBody),
}

/// Every route of the API but `/openapi.json`, which [`super::router`] adds.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/templates", post(create_template))
        .route("/v1/templates/{id}", get(get_template))
        .route("/v1/templates/{id}/claims", post(claim))
        .route("/v1/coupons/{id}/lock", post(lock))
        .route("/v1/coupons/{id}/redeem", post(redeem))
        .route("/v1/coupons/{id}/release", post(release))
        .route("/v1/coupons/{id}/refund", post(refund))
        .route("/v1/users/me/coupons", get(my_coupons))
        .route("/v1/admin/templates/{id}/audit", get(audit))
        .route("/v1/admin/reconcile", post(reconcile))
        .route("/v1/admin/user-tokens", post(mint_token))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
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
    description = "Creates a template. Besides what the schema says, the server refuses with \
        400 invalid_request: `valid_from` not before `valid_until`, `claim_starts_at` not \
        before `claim_ends_at`, and a `name` longer than 200 bytes of UTF-8.",
    request_body = NewTemplateDoc,
    responses((status = 201, body = TemplateDoc, description = "The created template"),
              (status = 400, body = ErrorBody, description = BAD_REQUEST),
              (status = 401, body = ErrorBody, description = ADMIN_UNAUTHORIZED),
              (status = 413, body = ErrorBody, description = TOO_LARGE),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)),
    security(("admin" = [])))]
async fn create_template(
    State(s): State<AppState>,
    _: Admin,
    ApiJson(spec): ApiJson<NewTemplate>,
) -> Response {
    timed(&s, "create_template", StatusCode::CREATED, async {
        // Postgres `text` cannot hold NUL: refused here rather than failing the insert (503).
        if spec.name.contains('\0') {
            return Err(ApiError::bad_request("name must not contain NUL"));
        }
        let t = s.engine.create_template(spec).await?;
        let remaining_stock = s.engine.remaining_stock(t.id).await?;
        Ok(TemplateView {
            template: t,
            remaining_stock,
        })
    })
    .await
}

#[utoipa::path(get, path = "/v1/templates/{id}", params(IdParam),
    responses((status = 200, body = TemplateDoc, description = "The template with its remaining_stock"),
              (status = 400, body = ErrorBody, description = BAD_ID),
              (status = 404, body = ErrorBody, description = NOT_FOUND),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)))]
async fn get_template(State(s): State<AppState>, IdPath(id): IdPath<TemplateId>) -> Response {
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

#[utoipa::path(post, path = "/v1/templates/{id}/claims", params(IdParam),
    description = "Claims one coupon of the template for the caller. Idempotent by \
        `request_id` within the template: a retry answers the first outcome's coupon.",
    request_body = ClaimRequest,
    responses((status = 201, body = ClaimResponse, description = "The coupon claimed (or the one a retry already got)"),
              (status = 400, body = ErrorBody, description = BAD_REQUEST),
              (status = 401, body = ErrorBody, description = USER_UNAUTHORIZED),
              (status = 404, body = ErrorBody, description = NOT_FOUND),
              (status = 409, body = ErrorBody, description = "stock_empty, user_limit, or invalid_state (template paused or ended, outside its claim window)"),
              (status = 413, body = ErrorBody, description = TOO_LARGE),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)),
    security(("user" = [])))]
async fn claim(
    State(s): State<AppState>,
    IdPath(id): IdPath<TemplateId>,
    User(user): User,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Response {
    timed(&s, "claim", StatusCode::CREATED, async {
        let request_id = RequestId::parse(req.request_id)?;
        // Boxed: axum and every tower layer move the handler's future by value, so a
        // kilobyte-sized claim future inline would be copied several times per request.
        let r = Box::pin(s.engine.claim(id, &user, &request_id)).await?;
        Ok(ClaimResponse {
            coupon_id: r.coupon_id,
            template_id: r.template_id.into(),
            remaining_stock: r.remaining_stock,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/coupons/{id}/redeem", params(IdParam),
    description = "Redeems a coupon for an order. **Redeem belongs to the order service, not \
        to the shopper**: it takes `order_amount` from its caller, and a shopper who sets it \
        could inflate a percent discount. A server started with a service token \
        (`COUPON_SERVICE_TOKEN`) accepts only that token here, with `user_id` naming the \
        order's user (403 forbidden for a user token); a server without one still lets the \
        shopper redeem with a user token (compatibility), where a `user_id`, if given, must \
        be the token's user (403 not_owner otherwise). Redeeming again with the same \
        `order_id` answers the same redemption. A coupon locked at checkout is redeemed by the \
        order holding the lock (its payment); another order gets 409 locked. Besides what the schema says, the server \
        refuses an `order_id` longer than 64 bytes of UTF-8, and a service call without \
        `user_id` (400 invalid_request).",
    request_body = RedeemRequest,
    responses((status = 200, body = RedeemResponse, description = "The redemption (or the earlier one with this order)"),
              (status = 409, body = ErrorBody, description = "already_used, locked (by another order's checkout), expired, below_min_amount, or invalid_state (the coupon is not issued)"),
              (status = 429, body = ErrorBody, description = "busy: another redemption of this coupon is in progress; retry"),
              OrderErrors),
    security(("service" = []), ("user" = [])))]
async fn redeem(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    caller: OrderCaller,
    ApiJson(req): ApiJson<RedeemRequest>,
) -> Response {
    timed(&s, "redeem", StatusCode::OK, async {
        let user = caller.order_user(req.user_id)?;
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

#[utoipa::path(post, path = "/v1/coupons/{id}/refund", params(IdParam),
    description = "Refunds the redemption of a coupon by `order_id`; the template's refund \
        policy decides whether the coupon returns to the user or to stock. **Refunds belong \
        to the order service**: only the shop knows whether the order was really refunded, \
        and a shopper who could refund an order the shop kept would use the coupon again on \
        the next one. A server with a service token accepts only that token here, with \
        `user_id` naming the order's user (403 forbidden for a user token); a server without \
        one lets the shopper refund their own order (compatibility; the server warns of this \
        at start). Refunding again answers the same result. Besides what the schema says, \
        the server refuses an `order_id` longer than 64 bytes of UTF-8, and a service call \
        without `user_id` (400 invalid_request).",
    request_body = RefundRequest,
    responses((status = 200, body = RefundResponse, description = "The refund (or the earlier one)"),
              (status = 409, body = ErrorBody, description = "invalid_state: the coupon is not used by this order"),
              OrderErrors),
    security(("service" = []), ("user" = [])))]
async fn refund(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    caller: OrderCaller,
    ApiJson(req): ApiJson<RefundRequest>,
) -> Response {
    timed(&s, "refund", StatusCode::OK, async {
        let user = caller.order_user(req.user_id)?;
        let r = s.engine.refund(id, &user, &req.order_id).await?;
        Ok(RefundResponse {
            coupon_id: r.coupon_id,
            status: r.status.as_str().to_owned(),
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/coupons/{id}/lock", params(IdParam),
    description = "Checkout: locks a coupon for an order being placed, until the order is paid \
        (redeem with the same `order_id`), cancelled (release) or the lock lapses (`ttl_secs`, \
        default 15 minutes; a lapsed lock no longer holds the coupon and the sweep gives it \
        back). A coupon locked for one order cannot be locked, redeemed or released by another \
        (409 locked). Locking again with the same `order_id` answers the same lock. The same \
        callers as redeem: the order service with `user_id` when the server has a service \
        token, the shopper otherwise. Besides what the schema says, the server refuses an \
        `order_id` longer than 64 bytes of UTF-8, and a service call without `user_id` \
        (400 invalid_request).",
    request_body = LockRequest,
    responses((status = 200, body = LockResponse, description = "The lock (or the earlier one by this order)"),
              (status = 409, body = ErrorBody, description = "locked (by another order), already_used, expired, or invalid_state (revoked, not valid yet, or already paid by this order)"),
              OrderErrors),
    security(("service" = []), ("user" = [])))]
async fn lock(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    caller: OrderCaller,
    ApiJson(req): ApiJson<LockRequest>,
) -> Response {
    timed(&s, "lock", StatusCode::OK, async {
        let user = caller.order_user(req.user_id)?;
        let ttl = match req.ttl_secs {
            None => None,
            Some(secs @ 1..=86_400) => Some(std::time::Duration::from_secs(secs.unsigned_abs())),
            Some(secs) => {
                return Err(ApiError::bad_request(format!(
                    "ttl_secs must be between 1 and 86400, not {secs}"
                )));
            }
        };
        let l = s
            .engine
            .lock_for_order(id, &user, &req.order_id, ttl)
            .await?;
        Ok(LockResponse {
            coupon_id: l.coupon_id,
            order_id: l.order_id,
            locked_until: l.locked_until,
        })
    })
    .await
}

#[utoipa::path(post, path = "/v1/coupons/{id}/release", params(IdParam),
    description = "Checkout: the order was cancelled; releases the lock it holds on the coupon, \
        which is the user's to use again. Idempotent: an order that holds no lock (released \
        before, or lapsed) answers `released: false`. An order that already paid with the \
        coupon is refused (409 invalid_state: refund it instead), as is a coupon held by \
        another order (409 locked or already_used). The same callers as redeem: the order \
        service with `user_id` when the server has a service token, the shopper otherwise.",
    request_body = ReleaseRequest,
    responses((status = 200, body = ReleaseResponse, description = "What the release did"),
              (status = 409, body = ErrorBody, description = "locked or already_used (another order holds it), or invalid_state (this order paid with it)"),
              OrderErrors),
    security(("service" = []), ("user" = [])))]
async fn release(
    State(s): State<AppState>,
    IdPath(id): IdPath,
    caller: OrderCaller,
    ApiJson(req): ApiJson<ReleaseRequest>,
) -> Response {
    timed(&s, "release", StatusCode::OK, async {
        let user = caller.order_user(req.user_id)?;
        let r = s
            .engine
            .release_order_lock(id, &user, &req.order_id)
            .await?;
        Ok(ReleaseResponse {
            coupon_id: r.coupon_id,
            released: r.released,
        })
    })
    .await
}

#[utoipa::path(get, path = "/v1/users/me/coupons",
    responses((status = 200, body = Vec<CouponDoc>, description = "The caller's coupons, newest first"),
              (status = 401, body = ErrorBody, description = USER_UNAUTHORIZED),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)),
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

#[utoipa::path(get, path = "/v1/admin/templates/{id}/audit", tag = "admin", params(IdParam),
    responses((status = 200, body = AuditDoc, description = "Invariant report I1–I5"),
              (status = 400, body = ErrorBody, description = BAD_ID),
              (status = 401, body = ErrorBody, description = ADMIN_UNAUTHORIZED),
              (status = 404, body = ErrorBody, description = NOT_FOUND),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)),
    security(("admin" = [])))]
async fn audit(State(s): State<AppState>, _: Admin, IdPath(id): IdPath<TemplateId>) -> Response {
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
    responses((status = 200, body = ReconcileDoc, description = "What the reconciler did"),
              (status = 401, body = ErrorBody, description = ADMIN_UNAUTHORIZED),
              (status = 503, body = ErrorBody, description = UNAVAILABLE)),
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
    description = "Mints a user token; with `ttl_secs` it expires that many seconds from now \
        (its expiry is covered by the MAC; an expired token answers 401 unauthorized).",
    responses((status = 200, body = TokenResponse, description = "The user's bearer token"),
              (status = 400, body = ErrorBody, description = BAD_REQUEST),
              (status = 401, body = ErrorBody, description = ADMIN_UNAUTHORIZED),
              (status = 413, body = ErrorBody, description = TOO_LARGE)),
    security(("admin" = [])))]
async fn mint_token(
    State(s): State<AppState>,
    _: Admin,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Response {
    timed(&s, "user_token", StatusCode::OK, async {
        let user = UserId::parse(req.user_id)?;
        match req.ttl_secs {
            None => Ok(TokenResponse {
                token: user_token(&s.user_secret, user.as_str()),
                expires_at: None,
            }),
            Some(ttl) if (1..=MAX_TOKEN_TTL_SECS).contains(&ttl) => {
                let expires_at = unix_now() + ttl;
                Ok(TokenResponse {
                    token: user_token_until(&s.user_secret, user.as_str(), expires_at),
                    expires_at: Some(expires_at),
                })
            }
            Some(ttl) => Err(ApiError::bad_request(format!(
                "ttl_secs must be between 1 and {MAX_TOKEN_TTL_SECS}, not {ttl}"
            ))),
        }
    })
    .await
}

#[utoipa::path(get, path = "/healthz",
    responses((status = 200, body = Health, description = "Redis and Postgres answer (`degraded`: one slowly)"),
              (status = 503, body = ErrorBody, description = "A store is down; the message names it and says why")))]
async fn health(State(s): State<AppState>) -> Response {
    timed(&s, "healthz", StatusCode::OK, async {
        let report = s.engine.health_report().await;
        if report.down() {
            return Err(ApiError::unavailable(report.summary()));
        }
        let doc = |h: &crate::service::StoreHealth| StoreHealthDoc {
            state: format!("{:?}", h.state).to_lowercase(),
            latency_ms: h.latency_ms,
        };
        Ok(Health {
            status: if report.degraded() { "degraded" } else { "ok" }.into(),
            postgres: doc(&report.postgres),
            redis: doc(&report.redis),
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
