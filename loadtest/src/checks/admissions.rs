//! I2 and I3 while the sale ran: the servers' count of sync claims Redis admitted and
//! Postgres refused (`crate::admissions`). The auditor sees both invariants at quiescence;
//! this is what Redis believed when it admitted.

use super::{Findings, RunRecord};

pub(super) fn check(ev: &RunRecord<'_>, f: &mut Findings) {
    let Some(run) = ev.stale_admissions else {
        return;
    };
    let servers = if run.servers == run.of {
        format!("{} server(s)", run.servers)
    } else {
        format!(
            "{} of {} servers (the others could not be read)",
            run.servers, run.of
        )
    };
    for count in run.counts.by_invariant() {
        match count.finding() {
            Some(finding) => f.flag(
                finding.invariant,
                format!(
                    "{} (coupon_sync_stale_admissions_total over {servers})",
                    finding.detail
                ),
            ),
            None => f.checked(
                count.invariant,
                format!(
                    "no sync claim Redis admitted was refused by Postgres for {} \
                     ({servers}' /metrics)",
                    count.refused_for
                ),
            ),
        }
    }
}
