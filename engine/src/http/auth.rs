//! Authentication: an admin bearer token, and user tokens `<user_id>.<hex HMAC-SHA256(secret,
//! user_id)>` verified in constant time, so one user can never act as another.

use axum::{extract::FromRequestParts, http::request::Parts};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{AppState, error::ApiError};
use crate::domain::ids::validate_user_id;

type HmacSha256 = Hmac<Sha256>;

/// Mints the token of `user_id`.
pub fn user_token(secret: &[u8], user_id: &str) -> String {
    // HMAC accepts keys of any length, so the key error cannot happen.
    let sig = HmacSha256::new_from_slice(secret)
        .map(|mut mac| {
            mac.update(user_id.as_bytes());
            mac.finalize().into_bytes().to_vec()
        })
        .unwrap_or_default();
    format!("{user_id}.{}", hex::encode(sig))
}

/// Checks a user token; returns the user id it names.
pub fn verify_user_token(secret: &[u8], token: &str) -> Option<String> {
    let (user, sig) = token.rsplit_once('.')?;
    validate_user_id(user).ok()?;
    let sig = hex::decode(sig).ok()?;
    let mut mac = HmacSha256::new_from_slice(secret).ok()?;
    mac.update(user.as_bytes());
    mac.verify_slice(&sig).ok()?;
    Some(user.to_owned())
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::unauthorized("missing bearer token"))
}

/// Constant-time equality of two byte strings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An authenticated admin.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if same(bearer(parts)?.as_bytes(), state.admin_token.as_bytes()) {
            Ok(Self)
        } else {
            Err(ApiError::unauthorized("invalid admin token"))
        }
    }
}

/// An authenticated user.
pub struct User(pub String);

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        verify_user_token(&state.user_secret, bearer(parts)?)
            .map(Self)
            .ok_or_else(|| ApiError::unauthorized("invalid user token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_with_the_right_secret_and_user() {
        let t = user_token(b"k", "alice");
        assert_eq!(verify_user_token(b"k", &t).as_deref(), Some("alice"));
        assert_eq!(verify_user_token(b"other", &t), None);
        let forged = t.replacen("alice", "bob", 1);
        assert_eq!(verify_user_token(b"k", &forged), None);
        assert_eq!(verify_user_token(b"k", "alice"), None);
        assert_eq!(verify_user_token(b"k", "alice.zz"), None);
    }
}
