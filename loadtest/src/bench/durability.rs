//! Whether the bench's Postgres flushes its commits. The claim-speed goals compare sync
//! claims, whose group commit pays one WAL flush per batch, with `pgbench` single-row
//! commits, which pay one each (shared among the clients flushing at once). Without the
//! flush (`fsync=off`, as test fixtures run; or `synchronous_commit=off`) the anchor costs a
//! fraction of what it costs on a Postgres as shipped, and the ratio stops measuring what
//! the goal is about; measured on this project's machine: a `pgbench` INSERT ~50 µs of
//! Postgres CPU without the flush, ~106–130 µs with it (loadtest/README.md, "Bench").

use anyhow::Context;
use coupon_engine::store::postgres::durability_settings;
use coupon_testkit::{Backends, Way};
use serde::{Deserialize, Serialize};

/// The Postgres settings that decide whether a commit waits for its flush, and where that
/// Postgres came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PostgresDurability {
    pub fsync: String,
    pub synchronous_commit: String,
    /// Who started it and how: the environment's, or one the bench started.
    pub source: String,
}

impl PostgresDurability {
    /// Asks the Postgres of `backends`.
    pub(crate) async fn read(backends: &Backends) -> anyhow::Result<Self> {
        let pool = sqlx::PgPool::connect(&backends.database_url)
            .await
            .context("connecting to Postgres to read fsync and synchronous_commit")?;
        // The engine's own reading, the one its start-up warning is made from.
        let (synchronous_commit, fsync) = durability_settings(&pool)
            .await
            .context("reading fsync and synchronous_commit")?;
        pool.close().await;
        let source = match backends.way {
            Way::Env => "COUPON_DATABASE_URL's Postgres, as it is configured",
            Way::Containers => "a Postgres container the bench started, fsync on",
            Way::Local => "a Postgres cluster the bench started with initdb, fsync on",
        };
        Ok(Self {
            fsync,
            synchronous_commit,
            source: source.to_owned(),
        })
    }

    /// True when a commit returns only once its WAL is on disk.
    pub(crate) fn flushes(&self) -> bool {
        self.fsync == "on" && self.synchronous_commit != "off"
    }

    /// The two settings as the header and the pgbench rows show them.
    pub(crate) fn settings(&self) -> String {
        format!(
            "fsync={}, synchronous_commit={}",
            self.fsync, self.synchronous_commit
        )
    }

    /// One line for the report's header.
    pub(crate) fn describe(&self) -> String {
        format!("Postgres: {} ({})", self.settings(), self.source)
    }

    /// What a reader must know when commits do not flush.
    pub(crate) fn warning(&self) -> Option<String> {
        (!self.flushes()).then(|| {
            format!(
                "Postgres does not wait for its WAL flush ({}): pgbench's single-row commits \
                 then cost no flush, the group commit's one flush per batch saves nothing, and \
                 the sync ratios do not measure what their goals are about. Point \
                 COUPON_DATABASE_URL at a Postgres with fsync=on and synchronous_commit=on, or \
                 unset it and let the bench start one.",
                self.settings()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(fsync: &str, synchronous_commit: &str) -> PostgresDurability {
        PostgresDurability {
            fsync: fsync.into(),
            synchronous_commit: synchronous_commit.into(),
            source: "test".into(),
        }
    }

    #[test]
    fn only_a_postgres_that_waits_for_its_flush_counts_as_flushing() {
        assert!(pg("on", "on").flushes());
        assert!(pg("on", "local").flushes());
        assert!(pg("on", "remote_apply").flushes());
        assert!(!pg("off", "on").flushes());
        assert!(!pg("on", "off").flushes());
        assert_eq!(pg("on", "on").warning(), None);
        let w = pg("off", "on").warning().unwrap_or_default();
        assert!(w.contains("fsync=off, synchronous_commit=on"), "{w}");
    }
}
