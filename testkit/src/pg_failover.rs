//! A Postgres primary with a streaming standby, for failovers (docs/ARCHITECTURE.md, "Store
//! identities"): made the way production makes one — `initdb`, then `pg_basebackup -R` on
//! loopback, streaming replication — with the standby's replication link through a fault
//! proxy (so a test can hold it, and the standby lags) and the clients' address a second
//! proxy standing for the VIP (or HAProxy, or PgBouncer) that moves to the new primary.

use std::time::{Duration, Instant};

use crate::{
    ProvisionError,
    fault_proxy::{FaultProxy, LinkMode},
    host::find_binary,
    local::LocalPostgres,
};

/// How the primary waits for its standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// A commit waits for the standby's flush (`synchronous_standby_names = '*'`,
    /// `synchronous_commit = on`): a failover loses nothing acknowledged.
    Synchronous,
    /// A commit does not wait (Postgres's default): a failover loses what the standby had
    /// not received.
    Asynchronous,
}

/// What a failover did, for a report.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The old primary's address.
    pub old_primary: String,
    /// The new primary's address.
    pub new_primary: String,
    /// How long the promotion took.
    pub promoted_in: Duration,
}

/// A primary, its streaming standby, and the two links.
#[derive(Debug)]
pub struct ReplicatedPostgres {
    primary: LocalPostgres,
    standby: LocalPostgres,
    replication: FaultProxy,
    vip: FaultProxy,
    mode: Replication,
}

/// How long the standby may take to start streaming.
const STREAMING_WITHIN: Duration = Duration::from_secs(30);

impl ReplicatedPostgres {
    /// Starts a primary and a standby streaming from it (synchronous or not), each on a
    /// free loopback port; clients reach the primary through [`Self::url`].
    pub fn start(mode: Replication) -> Result<Self, ProvisionError> {
        let primary = LocalPostgres::start()?;
        let replication = FaultProxy::start(&primary.addr())?;
        let standby = LocalPostgres::start_standby(&replication.addr().to_string(), &[])?;
        let vip = FaultProxy::start(&primary.addr())?;
        let pair = Self {
            primary,
            standby,
            replication,
            vip,
            mode,
        };
        pair.wait_for_standby("streaming", "state = 'streaming'")?;
        if mode == Replication::Synchronous {
            // Set once the standby streams: before, every commit would wait for it.
            pair.sql_on_primary("ALTER SYSTEM SET synchronous_standby_names = '*'")?;
            pair.sql_on_primary("SELECT pg_reload_conf()")?;
            pair.wait_for_standby("synchronous", "sync_state = 'sync'")?;
        }
        Ok(pair)
    }

    /// URL of the `postgres` database through the VIP.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}/postgres", self.vip.addr())
    }

    /// How the primary waits for its standby.
    pub fn replication(&self) -> Replication {
        self.mode
    }

    /// Waits until the standby has replayed everything the primary wrote so far.
    pub fn wait_until_replayed(&self) -> Result<(), ProvisionError> {
        self.wait_for_standby("caught up", "replay_lsn >= pg_current_wal_lsn()")
    }

    /// Holds every byte between the standby and the primary (a partition of the
    /// replication link): the standby stops receiving WAL. Asynchronous, the primary goes on
    /// committing and acknowledging; synchronous, its commits wait.
    pub fn hold_replication(&self) {
        self.replication.set(LinkMode::Blackhole);
    }

    /// Fails over as an operator or Patroni would: the primary stops at once (a crashed
    /// machine), the standby is promoted (a new timeline) and the VIP moves to it.
    pub fn fail_over(&self) -> Result<Failover, ProvisionError> {
        self.primary.stop_immediate()?;
        let start = Instant::now();
        self.standby.promote()?;
        let promoted_in = start.elapsed();
        self.vip.move_to(&self.standby.addr())?;
        Ok(Failover {
            old_primary: self.primary.addr(),
            new_primary: self.standby.addr(),
            promoted_in,
        })
    }

    /// Waits until the primary lists its standby with `condition` (in `pg_stat_replication`).
    fn wait_for_standby(&self, what: &str, condition: &str) -> Result<(), ProvisionError> {
        let sql = format!("SELECT count(*) FROM pg_stat_replication WHERE {condition}");
        let start = Instant::now();
        while start.elapsed() < STREAMING_WITHIN {
            if self.sql_on_primary(&sql)?.trim() == "1" {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(ProvisionError::Local(format!(
            "the standby was not {what} within {STREAMING_WITHIN:?}"
        )))
    }

    fn sql_on_primary(&self, sql: &str) -> Result<String, ProvisionError> {
        let psql =
            find_binary("psql").ok_or_else(|| ProvisionError::Local("psql not found".into()))?;
        let addr = self.primary.addr();
        let (host, port) = addr.rsplit_once(':').unwrap_or(("127.0.0.1", "5432"));
        let out = std::process::Command::new(psql)
            .args(["-h", host, "-p", port, "-U", "postgres", "-d", "postgres"])
            .args(["-XAtc", sql])
            .output()
            .map_err(|e| ProvisionError::Local(format!("psql: {e}")))?;
        if !out.status.success() {
            return Err(ProvisionError::Local(format!(
                "psql {sql:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
