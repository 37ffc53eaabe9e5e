//! Extractors whose rejections are API errors (400 `invalid_request` with the reason).

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{HeaderMap, StatusCode, header::CONTENT_TYPE, request::Parts},
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::IntoParams;
use uuid::Uuid;

use super::error::ApiError;

/// A JSON body; malformed JSON, wrong types and unknown fields are 400 with the reason, a
/// body over the limit is 413.
///
/// A number with a zero fraction (`5.0`, `5e0`) is read as the integer it equals: JSON Schema's
/// `integer` admits it, so a client following the description may send it.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(req.headers());
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(super::MAX_BODY_BYTES)
            } else {
                ApiError::bad_request("request body unreadable")
            }
        })?;
        if !json {
            return Err(ApiError::bad_request(
                "expected a request with `content-type: application/json`",
            ));
        }
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(e) => serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|mut v| integral_floats_to_ints(&mut v).then_some(v))
                .and_then(|v| serde_json::from_value(v).ok())
                .map(Self)
                // The first error names the field; keep it when the retry does not help.
                .ok_or_else(|| ApiError::bad_request(e.body_text())),
        }
    }
}

/// Whether the content type is JSON (`application/json` or `application/*+json`), as axum's
/// `Json` requires.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Largest magnitude below which every integer is exactly an `f64`; beyond it the float may
/// already be a rounded neighbour of what was sent, so it is left to fail as a float.
const EXACT_F64_INTS: f64 = 9_007_199_254_740_992.0;

/// Rewrites every float with a zero fraction into the integer it equals; true if any changed.
fn integral_floats_to_ints(v: &mut Value) -> bool {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < EXACT_F64_INTS => {
                // In range and integral, so the cast is exact.
                *v = Value::from(f as i64);
                true
            }
            _ => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
            integral_floats_to_ints(item) | changed
        }),
        Value::Object(fields) => fields.values_mut().fold(false, |changed, item| {
            integral_floats_to_ints(item) | changed
        }),
        _ => false,
    }
}

/// A UUID path parameter in its canonical hyphenated form, as the id type `T` the route
/// names (a template's or a coupon's); anything else is 400.
pub struct IdPath<T = Uuid>(pub T);

/// How [`IdPath`] is described in the OpenAPI document.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IdParam {
    /// Template or coupon id: a hyphenated UUID.
    #[param(
        pattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        min_length = 36,
        max_length = 36
    )]
    pub id: Uuid,
}

/// Length of a hyphenated UUID.
const HYPHENATED_LEN: usize = 36;

impl<S: Send + Sync, T: From<Uuid>> FromRequestParts<S> for IdPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::bad_request(e.body_text()))?;
        // `Uuid` also parses the simple, braced and URN forms; the description promises only
        // the hyphenated one, so the others are refused rather than silently accepted.
        raw.parse::<Uuid>()
            .ok()
            .filter(|_| raw.len() == HYPHENATED_LEN)
            .map(|id| Self(id.into()))
            .ok_or_else(|| {
                ApiError::bad_request(format!("{raw:?} is not a valid id (hyphenated UUID)"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_integral_floats_become_integers() {
        let mut v = serde_json::json!({"a": 5.0, "b": [1e3, -0.0], "c": 1.5, "d": 7, "e": 1e300});
        assert!(integral_floats_to_ints(&mut v));
        assert_eq!(
            v,
            serde_json::json!({"a": 5, "b": [1000, 0], "c": 1.5, "d": 7, "e": 1e300})
        );
        let mut unchanged = serde_json::json!({"x": "5.0", "y": 2});
        assert!(!integral_floats_to_ints(&mut unchanged));
    }
}
