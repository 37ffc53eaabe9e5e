//! Sync or async claims: when a claim's row is written relative to its reply (its own
//! module so that the engine's variants can name the mode a defect lives in without
//! depending on the whole configuration).

use serde::{Deserialize, Serialize};

/// When a claim's Postgres row is written relative to the reply (docs/ARCHITECTURE.md,
/// "Claim": sync and async mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Persistence {
    /// The reply waits for the row: an acknowledged claim survives a Redis crash.
    #[default]
    Sync,
    /// The reply follows the Redis script; a persister writes rows in batches. Faster, but a
    /// Redis crash can lose acknowledged claims.
    Async,
}

impl std::str::FromStr for Persistence {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sync" => Ok(Self::Sync),
            "async" => Ok(Self::Async),
            other => Err(format!("persistence must be sync or async, not {other:?}")),
        }
    }
}
