//! The API's error: every failure is `{"error": {"code", "message"}}` with a fitting status.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{EngineError, domain::ids::IdError};

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// 400 `invalid_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            message: message.into(),
        }
    }

    /// 413 `payload_too_large`: the body is over `limit` bytes.
    pub fn payload_too_large(limit: usize) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "payload_too_large",
            message: format!("request body larger than {limit} bytes"),
        }
    }

    /// 503 `unavailable` with a message of the server's own (never a store's error text).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: message.into(),
        }
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: &str) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: message.to_owned(),
        }
    }

    /// 403 `forbidden`: the token is valid but its role may not call the operation.
    pub fn forbidden(message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            message: message.to_owned(),
        }
    }

    /// 403 `not_owner`: the request acts for another user than the token's.
    pub fn not_owner(message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code: "not_owner",
            message: message.to_owned(),
        }
    }

    /// 404 `not_found` for an unknown route.
    pub fn no_route() -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: "no such route".into(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let status = match &e {
            EngineError::StockEmpty
            | EngineError::UserLimit { .. }
            | EngineError::AlreadyUsed
            | EngineError::Locked
            | EngineError::Expired
            | EngineError::BelowMinAmount { .. }
            | EngineError::InvalidState(_) => StatusCode::CONFLICT,
            EngineError::NotFound(_) => StatusCode::NOT_FOUND,
            EngineError::NotOwner => StatusCode::FORBIDDEN,
            EngineError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            EngineError::Busy => StatusCode::TOO_MANY_REQUESTS,
            EngineError::Unavailable(_) | EngineError::Database(_) | EngineError::Redis(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        };
        let message = if e.outcome_unknown() {
            // Internals (SQL, Redis errors) stay in the log.
            tracing::warn!(error = %e, "backend failure");
            "a backend is unavailable; the outcome is unknown, retry with the same ids".to_owned()
        } else {
            e.to_string()
        };
        Self {
            status,
            code: e.code(),
            message,
        }
    }
}

impl From<IdError> for ApiError {
    fn from(e: IdError) -> Self {
        EngineError::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}
