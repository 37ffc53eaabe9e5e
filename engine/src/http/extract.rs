//! Extractors whose rejections are API errors (400 `invalid_request` with the reason).

use axum::{
    extract::{FromRequest, FromRequestParts, Request, rejection::JsonRejection},
    http::request::Parts,
};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::error::ApiError;

/// A JSON body; malformed JSON, wrong types and unknown fields are 400 with the reason.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(JsonRejection::BytesRejection(_)) => Err(ApiError::bad_request(format!(
                "request body too large or unreadable (limit {} bytes)",
                super::MAX_BODY_BYTES
            ))),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// A UUID path parameter; anything else is 400.
pub struct IdPath(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::bad_request(e.body_text()))?;
        raw.parse()
            .map(Self)
            .map_err(|_| ApiError::bad_request(format!("{raw:?} is not a valid id (UUID)")))
    }
}
