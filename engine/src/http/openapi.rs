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
    info(title = "coupon-engine", description = "Coupon / flash-sale API (DESIGN §9)"),
    paths(
        routes::create_template, routes::get_template, routes::claim, routes::redeem,
        routes::refund, routes::my_coupons, routes::audit, routes::reconcile,
        routes::mint_token, routes::health, routes::metrics, serve
    ),
    components(schemas(
        dto::ClaimRequest, dto::ClaimResponse, dto::RedeemRequest, dto::RedeemResponse,
        dto::RefundRequest, dto::RefundResponse, dto::TokenRequest, dto::TokenResponse,
        dto::ErrorBody, dto::ErrorDetail, dto::Health
    )),
    modifiers(&Security)
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for name in ["admin", "user"] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
        }
    }
}

/// `GET /openapi.json`
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "This document")))]
pub async fn serve() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}
