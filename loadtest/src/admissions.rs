//! What the servers admitted on stale counters during the run: each sync claim Redis
//! admitted and Postgres refused means Redis's counters were behind Postgres's (I2, I3 while
//! the sale ran). After a restart or failover the servers notice, Redis is rebuilt before it
//! admits again, so a correct run keeps this at zero even under `--nemesis
//! redis-stale-restart`. Read from every server's `/metrics` before the load and after the
//! audit; the difference is the run's (a server's count is since it started).

use coupon_engine::StaleAdmissions;

use crate::api::Api;

/// Every server's count at the start of the run.
pub(crate) struct AdmissionsProbe {
    servers: Vec<(Api, Option<StaleAdmissions>)>,
}

impl AdmissionsProbe {
    /// Reads every server's count now. A server that cannot be read, or does not export the
    /// series, is left out of the check, not failed: the report names how many of the
    /// servers were read, and has no such line when none was.
    pub(crate) async fn start(bases: &[String]) -> Self {
        let mut servers = Vec::new();
        for base in bases {
            let Ok(api) = Api::new(base, "") else {
                continue;
            };
            let before = read(&api).await;
            servers.push((api, before));
        }
        Self { servers }
    }

    /// The run's stale admissions over every server (None: no server could be read both
    /// times).
    pub(crate) async fn during_run(&self) -> Option<RunAdmissions> {
        let mut total = StaleAdmissions::default();
        let mut read_twice = 0;
        for (api, before) in &self.servers {
            let (Some(before), Some(after)) = (before, read(api).await) else {
                continue;
            };
            total.stock_empty += after.stock_empty.saturating_sub(before.stock_empty);
            total.user_limit += after.user_limit.saturating_sub(before.user_limit);
            read_twice += 1;
        }
        (read_twice > 0).then_some(RunAdmissions {
            counts: total,
            servers: read_twice,
            of: self.servers.len(),
        })
    }
}

/// The stale admissions of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunAdmissions {
    /// Summed over the servers read.
    pub counts: StaleAdmissions,
    /// Servers read before and after.
    pub servers: usize,
    /// Servers in the run.
    pub of: usize,
}

async fn read(api: &Api) -> Option<StaleAdmissions> {
    match api.stale_admissions().await {
        Ok(counts) => counts,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the server's stale admissions");
            None
        }
    }
}
