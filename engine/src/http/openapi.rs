//! The OpenAPI 3.1 document, generated from the handlers' annotations (so it cannot drift).

use axum::{Json, response::IntoResponse};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};

use super::{dto, routes};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "coupon-engine",
        description = "Coupon / flash-sale API (docs/ARCHITECTURE.md, \"HTTP API\"). Every \
            error is `{\"error\": {\"code\", \"message\"}}`; bodies are limited to 16 KiB \
            (413). Admin operations take the admin bearer token (`admin`), user operations a \
            user token minted by `POST /v1/admin/user-tokens` (`user`). The order's side — \
            checkout's lock, redeem (payment), release (cancel) and refund — belongs to the \
            order service (`service`, the server's COUPON_SERVICE_TOKEN), not to the shopper: \
            redeem takes `order_amount` from its caller, and only the shop knows whether an \
            order was paid, cancelled or refunded."
    ),
    paths(
        routes::create_template, routes::get_template, routes::claim, routes::lock,
        routes::redeem, routes::release, routes::refund, routes::my_coupons, routes::audit, routes::reconcile,
        routes::mint_token, routes::health, routes::metrics, serve
    ),
    components(schemas(
        dto::ClaimRequest, dto::ClaimResponse, dto::RedeemRequest, dto::RedeemResponse,
        dto::RefundRequest, dto::RefundResponse, dto::LockRequest, dto::LockResponse,
        dto::ReleaseRequest, dto::ReleaseResponse, dto::TokenRequest, dto::TokenResponse,
        dto::ErrorBody, dto::ErrorDetail, dto::ErrorCode, dto::Health, dto::StoreHealthDoc, dto::NewTemplateDoc,
        dto::TemplateDoc, dto::CouponDoc, dto::AuditDoc, dto::ViolationDoc, dto::ReconcileDoc,
        dto::DriftDoc
    )),
    modifiers(&Security, &Schemas)
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The server's admin token (COUPON_ADMIN_TOKEN)"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "user",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format(
                        "<user_id>.<hex HMAC-SHA256(secret, user_id)> or \
                         <user_id>.<expires_at>.<hex HMAC-SHA256(secret, user_id.expires_at)>",
                    )
                    .description(Some(
                        "A user token, minted by POST /v1/admin/user-tokens; it names the caller \
                         and may carry an expiry (Unix seconds) covered by its MAC",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "service",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The order service's token (COUPON_SERVICE_TOKEN): the caller of lock, \
                         redeem, release and refund",
                    ))
                    .build(),
            ),
        );
    }
}

/// The schemas built by hand because derive cannot state them (tagged variants, `null`-only
/// fields, one-of-two requirements).
struct Schemas;

impl Modify for Schemas {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .schemas
            .insert("Discount".into(), dto::discount_schema().into());
        for (name, schema) in dto::discount_variant_schemas() {
            components.schemas.insert(name.into(), schema.into());
        }
    }
}

/// `GET /openapi.json`
#[utoipa::path(get, path = "/openapi.json",
    responses((status = 200, description = "This document", content_type = "application/json", body = Object)))]
pub async fn serve() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
