//! The coupon HTTP API (docs/ARCHITECTURE.md, "HTTP API") on axum: routes only translate
//! between JSON and the engine; errors map to stable codes; internals never reach clients.

pub mod auth;
pub mod deadline;
pub mod dto;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod runtime;

use std::{
    future::{Future, IntoFuture},
    sync::Arc,
};

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
    // Mutant D12 has no deadline anywhere, this layer's included.
    let deadline = if state.engine.config().variant.has_deadlines() {
        state.engine.config().deadline
    } else {
        std::time::Duration::MAX
    };
    // Wired here, not in `routes`: the document names the routes' handlers, so routes
    // serving it would make the two modules import each other.
    routes::routes()
        .route("/openapi.json", axum::routing::get(openapi::serve))
        .with_state(state)
        .layer(axum::middleware::from_fn(move |request, next| {
            deadline::within(deadline, request, next)
        }))
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
    // Draining is bounded: a request in flight ends within the deadline, so a drain that
    // takes longer waits on a connection that will never finish (a client that stopped
    // reading); past the bound the server stops anyway.
    let drain = engine.config().deadline + DRAIN_MARGIN;
    let (signalled_tx, signalled_rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        shutdown.await;
        let _ = signalled_tx.send(());
    };
    let serving = axum::serve(listener, router(state)).with_graceful_shutdown(shutdown);
    let bounded = async move {
        let _ = signalled_rx.await;
        tokio::time::sleep(drain).await;
    };
    let result = tokio::select! {
        result = serving.into_future() => result,
        () = bounded => {
            tracing::warn!(drain_ms = drain.as_millis() as u64,
                "connections still open after the drain bound; stopping anyway");
            Ok(())
        }
    };
    if tokio::time::timeout(drain, engine.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "the async persister did not drain within the bound; its pending intents stay in Redis for the reconciler"
        );
    }
    result
}

/// Beyond the request deadline, how long a drain may take before the server stops anyway.
pub const DRAIN_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);
