//! The coupon HTTP API (docs/ARCHITECTURE.md, "HTTP API") on axum: routes only translate
//! between JSON and the engine; errors map to stable codes; internals never reach clients.

pub mod auth;
pub mod dto;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod runtime;

use std::{future::Future, sync::Arc};

use axum::{Router, extract::DefaultBodyLimit};
use tokio::net::TcpListener;
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};

use crate::CouponEngine;

/// Largest request body accepted (bytes); bigger bodies get 413 before any parsing.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: CouponEngine,
    /// Admin bearer token.
    pub admin_token: Arc<str>,
    /// Key of the user tokens' HMAC.
    pub user_secret: Arc<[u8]>,
    /// The order service's bearer token; when set, only it may redeem.
    pub service_token: Option<Arc<str>>,
    /// Request metrics.
    pub metrics: Arc<metrics::Metrics>,
}

impl AppState {
    /// State for `engine` with the given secrets.
    pub fn new(engine: CouponEngine, admin_token: &str, user_secret: &str) -> Self {
        Self {
            engine,
            admin_token: admin_token.into(),
            user_secret: user_secret.as_bytes().into(),
            service_token: None,
            metrics: Arc::new(metrics::Metrics::default()),
        }
    }

    /// Gives redeem to the order service: with `token`, only it may redeem (shoppers get 403).
    pub fn with_service_token(mut self, token: &str) -> Self {
        self.service_token = Some(token.into());
        self
    }
}

/// The full router: API routes, body limit, request ids and tracing.
pub fn router(state: AppState) -> Router {
    let header = axum::http::HeaderName::from_static("x-request-id");
    // Wired here, not in `routes`: the document names the routes' handlers, so routes
    // serving it would make the two modules import each other.
    routes::routes()
        .route("/openapi.json", axum::routing::get(openapi::serve))
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(PropagateRequestIdLayer::new(header.clone()))
        .layer(TraceLayer::new_for_http())
        .layer(SetRequestIdLayer::new(header, MakeRequestUuid))
}

/// Serves the API on `listener` until `shutdown` resolves, then drains in-flight requests
/// and the engine's async persister.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let engine = state.engine.clone();
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    engine.shutdown().await;
    result
}
