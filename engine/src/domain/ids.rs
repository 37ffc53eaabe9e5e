//! Validation of the identifiers clients send (user ids, request ids, order ids).

use crate::error::{EngineError, EngineResult};

/// Longest user, request or order id accepted.
pub const MAX_ID_LEN: usize = 64;

/// A user id: 1–64 chars of `[A-Za-z0-9_-]` (it is embedded in Redis values and tokens).
pub fn validate_user_id(user_id: &str) -> EngineResult<()> {
    validate_id("user_id", user_id)
}

/// A claim request id (idempotency key): same alphabet and length as user ids.
pub fn validate_request_id(request_id: &str) -> EngineResult<()> {
    validate_id("request_id", request_id)
}

/// An order id: 1–64 printable characters without control characters.
pub fn validate_order_id(order_id: &str) -> EngineResult<()> {
    if order_id.is_empty() || order_id.len() > MAX_ID_LEN {
        return Err(EngineError::invalid(format!(
            "order_id must be 1 to {MAX_ID_LEN} bytes"
        )));
    }
    if order_id.chars().any(char::is_control) {
        return Err(EngineError::invalid(
            "order_id must not contain control characters",
        ));
    }
    Ok(())
}

fn validate_id(field: &str, value: &str) -> EngineResult<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_ID_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(EngineError::invalid(format!(
            "{field} must be 1 to {MAX_ID_LEN} characters of [A-Za-z0-9_-]"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(validate_user_id("alice_1-x").is_ok());
        assert!(validate_user_id("").is_err());
        assert!(validate_user_id("a|b").is_err());
        assert!(validate_user_id(&"a".repeat(65)).is_err());
        assert!(validate_request_id("r-1").is_ok());
        assert!(validate_order_id("order #1/2").is_ok());
        assert!(validate_order_id("a\nb").is_err());
        assert!(validate_order_id("").is_err());
    }
}
