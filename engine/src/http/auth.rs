//! Authentication: an admin bearer token, an optional service token (the order service, which
//! alone may redeem once it is configured), and user tokens verified in constant time, so one
//! user can never act as another.
//!
//! A user token is `<user_id>.<hex HMAC-SHA256(secret, user_id)>` (no expiry, the original
//! format, still accepted) or `<user_id>.<expiry>.<hex HMAC-SHA256(secret, "<user_id>.<expiry>")>`
//! with the expiry in Unix seconds. User ids never contain `.`, so the two messages the MAC
//! covers can never be confused, and the expiry cannot be changed without the secret.

use axum::{extract::FromRequestParts, http::request::Parts};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{AppState, error::ApiError};
use crate::domain::ids::UserId;

type HmacSha256 = Hmac<Sha256>;

/// Why a user token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Malformed, or its MAC does not match.
    #[error("invalid user token")]
    Invalid,
    /// Well-formed and authentic, but past its expiry.
    #[error("user token expired; mint a new one")]
    Expired,
}

/// Hex HMAC-SHA256 of `message` under `secret`.
fn mac_hex(secret: &[u8], message: &str) -> String {
    // HMAC accepts keys of any length, so the key error cannot happen.
    let sig = HmacSha256::new_from_slice(secret)
        .map(|mut mac| {
            mac.update(message.as_bytes());
            mac.finalize().into_bytes().to_vec()
        })
        .unwrap_or_default();
    hex::encode(sig)
}

/// Mints the token of `user_id`, valid until the secret changes.
pub fn user_token(secret: &[u8], user_id: &str) -> String {
    format!("{user_id}.{}", mac_hex(secret, user_id))
}

/// Mints the token of `user_id`, valid until `expires_at` (Unix seconds).
pub fn user_token_until(secret: &[u8], user_id: &str, expires_at: i64) -> String {
    let message = format!("{user_id}.{expires_at}");
    let mac = mac_hex(secret, &message);
    format!("{message}.{mac}")
}

/// Checks a user token at `now` (Unix seconds); returns the user id it names.
pub fn verify_user_token(secret: &[u8], token: &str, now: i64) -> Result<UserId, TokenError> {
    let (message, sig) = token.rsplit_once('.').ok_or(TokenError::Invalid)?;
    let (user, expiry) = match message.split_once('.') {
        Some((user, expiry)) => (user, Some(expiry)),
        None => (message, None),
    };
    let user_id = UserId::parse(user).map_err(|_| TokenError::Invalid)?;
    // Only canonical decimal: a second spelling of the same expiry would be a second token.
    let expires_at = match expiry {
        Some(e) if e.bytes().all(|b| b.is_ascii_digit()) && !e.starts_with('0') => {
            Some(e.parse::<i64>().map_err(|_| TokenError::Invalid)?)
        }
        Some(_) => return Err(TokenError::Invalid),
        None => None,
    };
    let sig = hex::decode(sig).map_err(|_| TokenError::Invalid)?;
    let mut mac = HmacSha256::new_from_slice(secret).map_err(|_| TokenError::Invalid)?;
    mac.update(message.as_bytes());
    mac.verify_slice(&sig).map_err(|_| TokenError::Invalid)?;
    // Checked after the MAC, so "expired" is never said of a forged token.
    if expires_at.is_some_and(|at| at <= now) {
        return Err(TokenError::Expired);
    }
    Ok(user_id)
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
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

/// The user a user token names.
fn user_of(state: &AppState, token: &str) -> Result<UserId, ApiError> {
    verify_user_token(&state.user_secret, token, unix_now())
        .map_err(|e| ApiError::unauthorized(&e.to_string()))
}

/// An authenticated user.
pub struct User(pub UserId);

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        user_of(state, bearer(parts)?).map(Self)
    }
}

impl OrderCaller {
    /// The user whose order this is: the one the order service names (required), or the
    /// shopper's own (a `user_id`, if given, must be theirs).
    pub fn order_user(self, named: Option<String>) -> Result<UserId, ApiError> {
        match (self, named) {
            (Self::Service, Some(named)) => Ok(UserId::parse(named)?),
            (Self::Service, None) => Err(ApiError::bad_request(
                "user_id is required with the service token: the user whose order this is",
            )),
            (Self::User(user), Some(named)) if named != user.as_str() => Err(ApiError::not_owner(
                "user_id names another user than the token's",
            )),
            (Self::User(user), _) => Ok(user),
        }
    }
}

/// Who may act on an order — lock, redeem, release, refund: the order service (its token,
/// when the server has one), or — only when the server has no service token, for
/// compatibility — the shopper. Redeem takes `order_amount` from its caller (a shopper who
/// sets it could inflate a percent discount), and only the shop knows whether an order was
/// really refunded or cancelled (a shopper who refunds an order the shop kept would use the
/// coupon again on the next one).
pub enum OrderCaller {
    /// The order service, acting for the user the request names.
    Service,
    /// A shopper with a user token (servers without a service token only).
    User(UserId),
}

impl FromRequestParts<AppState> for OrderCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        let Some(service) = &state.service_token else {
            return user_of(state, token).map(Self::User);
        };
        if same(token.as_bytes(), service.as_bytes()) {
            return Ok(Self::Service);
        }
        // An authentic user token is refused for what it is, not as an unknown token.
        user_of(state, token)?;
        Err(ApiError::forbidden(
            "orders belong to the order service on this server: lock, redeem, release and \
             refund with the service token",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_only_with_the_right_secret_and_user() {
        let t = user_token(b"k", "alice");
        assert_eq!(
            verify_user_token(b"k", &t, 0).as_ref().map(UserId::as_str),
            Ok("alice")
        );
        assert_eq!(verify_user_token(b"other", &t, 0), Err(TokenError::Invalid));
        let forged = t.replacen("alice", "bob", 1);
        assert_eq!(
            verify_user_token(b"k", &forged, 0),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            verify_user_token(b"k", "alice", 0),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            verify_user_token(b"k", "alice.zz", 0),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn an_expiry_is_covered_by_the_mac_and_enforced() {
        let t = user_token_until(b"k", "alice", 1_000);
        assert_eq!(
            verify_user_token(b"k", &t, 999)
                .as_ref()
                .map(UserId::as_str),
            Ok("alice")
        );
        assert_eq!(verify_user_token(b"k", &t, 1_000), Err(TokenError::Expired));
        // Moving the expiry breaks the MAC, so it is invalid, never "expired" or valid.
        let later = t.replacen(".1000.", ".9000.", 1);
        assert_eq!(
            verify_user_token(b"k", &later, 999),
            Err(TokenError::Invalid)
        );
        let padded = t.replacen(".1000.", ".01000.", 1);
        assert_eq!(
            verify_user_token(b"k", &padded, 999),
            Err(TokenError::Invalid)
        );
        // An old token's MAC cannot be passed off with an expiry, nor the reverse.
        let (user, mac) = user_token(b"k", "alice")
            .split_once('.')
            .map(|(u, m)| (u.to_owned(), m.to_owned()))
            .unwrap_or_default();
        let grafted = format!("{user}.5000.{mac}");
        assert_eq!(
            verify_user_token(b"k", &grafted, 0),
            Err(TokenError::Invalid)
        );
        let stripped = format!("alice.{}", t.rsplit_once('.').map_or("", |(_, m)| m));
        assert_eq!(
            verify_user_token(b"k", &stripped, 0),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            verify_user_token(b"k", &user_token_until(b"k", "alice", -5), 0),
            Err(TokenError::Invalid),
            "a negative expiry is not canonical decimal"
        );
    }
}
