//! The request deadline (docs/ARCHITECTURE.md, "Deadlines"): every request is answered
//! within the engine's deadline. Past it the handler's future is dropped (whatever store call
//! it waited on with it) and the client gets 503 `unavailable`, outcome unknown; claims,
//! redeems and refunds are idempotent by their ids, so the retry is safe.
//!
//! This is the outermost bound; the stores' own deadlines (Redis's response timeout, the
//! claim batch's) answer sooner when they can, with a precise reason.

use std::time::Duration;

use axum::{extract::Request, middleware::Next, response::IntoResponse, response::Response};

use super::error::ApiError;
use crate::EngineError;

/// Runs the request's handler for at most `deadline`.
pub async fn within(deadline: Duration, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%path, deadline_ms = deadline.as_millis() as u64,
                "request deadline exceeded; answered 503");
            ApiError::from(EngineError::Unavailable(format!(
                "no answer within the {} ms deadline",
                deadline.as_millis()
            )))
            .into_response()
        }
    }
}
