//! The identifiers the engine passes around, each its own type so that a template id, a user
//! id and a request id cannot be swapped for one another without the compiler noticing; and
//! the parsing of the ones clients send (user ids, request ids, order ids).

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{EngineError, EngineResult};

/// Longest user, request or order id accepted.
pub const MAX_ID_LEN: usize = 64;

/// A coupon template's id. Serialised, bound in SQL and printed (Redis keys) exactly as the
/// UUID it wraps.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct TemplateId(Uuid);

impl TemplateId {
    /// A fresh id, time-ordered (UUIDv7) like every template id the engine creates.
    pub fn new_v7() -> Self {
        Self(Uuid::now_v7())
    }

    /// The UUID itself.
    pub const fn as_uuid(self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for TemplateId {
    fn from(id: Uuid) -> Self {
        Self(id)
    }
}

impl From<TemplateId> for Uuid {
    fn from(id: TemplateId) -> Self {
        id.0
    }
}

impl fmt::Display for TemplateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Why a client's user id or request id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be 1 to {MAX_ID_LEN} characters of [A-Za-z0-9_-]")]
pub struct IdError {
    field: &'static str,
}

impl IdError {
    /// The field refused: `user_id` or `request_id`.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

impl From<IdError> for EngineError {
    fn from(e: IdError) -> Self {
        EngineError::invalid(e.to_string())
    }
}

/// Defines a string id of 1–64 chars of `[A-Za-z0-9_-]` named `$field` in errors.
macro_rules! client_id {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Parses a client's id; the error names the field.
            pub fn parse(id: impl Into<String>) -> Result<Self, IdError> {
                let id = id.into();
                if is_client_id(&id) {
                    Ok(Self(id))
                } else {
                    Err(IdError { field: $field })
                }
            }

            /// An id the engine holds already: read back from its own stores (which take only
            /// parsed ids), or derived by a mutant from a client's.
            pub(crate) fn trusted(id: String) -> Self {
                Self(id)
            }

            /// The id as sent, for SQL, Redis and tokens.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;

            fn try_from(id: &str) -> Result<Self, IdError> {
                Self::parse(id)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(id: String) -> Result<Self, IdError> {
                Self::parse(id)
            }
        }
    };
}

client_id!(
    /// A user id: 1–64 chars of `[A-Za-z0-9_-]` (it is embedded in Redis values and tokens,
    /// where `|` and `.` separate fields).
    UserId,
    "user_id"
);

client_id!(
    /// A claim request id (idempotency key): same alphabet and length as user ids.
    RequestId,
    "request_id"
);

fn is_client_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_ID_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(UserId::parse("alice_1-x").is_ok());
        assert!(UserId::parse("").is_err());
        assert!(UserId::parse("a|b").is_err());
        assert!(UserId::parse("a".repeat(65)).is_err());
        assert!(RequestId::parse("r-1").is_ok());
        assert!(validate_order_id("order #1/2").is_ok());
        assert!(validate_order_id("a\nb").is_err());
        assert!(validate_order_id("").is_err());
    }

    #[test]
    fn refusals_name_the_field_as_before() {
        let user = EngineError::from(UserId::parse("a b").expect_err("refused"));
        assert_eq!(
            user.to_string(),
            "user_id must be 1 to 64 characters of [A-Za-z0-9_-]"
        );
        let request = EngineError::from(RequestId::parse("").expect_err("refused"));
        assert_eq!(request.code(), "invalid_request");
        assert_eq!(
            request.to_string(),
            "request_id must be 1 to 64 characters of [A-Za-z0-9_-]"
        );
    }

    #[test]
    fn ids_print_and_serialise_as_what_they_wrap() {
        let t = TemplateId::from(Uuid::nil());
        assert_eq!(t.to_string(), Uuid::nil().to_string());
        assert_eq!(
            serde_json::to_string(&t).expect("valid"),
            serde_json::to_string(&Uuid::nil()).expect("valid")
        );
        let u = UserId::parse("alice").expect("valid");
        assert_eq!(u.to_string(), "alice");
        assert_eq!(serde_json::to_string(&u).expect("valid"), "\"alice\"");
    }
}
