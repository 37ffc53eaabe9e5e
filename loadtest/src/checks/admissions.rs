//! I2 and I3 while the sale ran: the servers' count of sync claims Redis admitted and
//! Postgres refused (`crate::admissions`). The auditor sees both invariants at quiescence;
//! this is what Redis believed when it admitted.

use coupon_engine::Invariant;

use super::{Evidence, Findings};

pub(super) fn check(ev: &Evidence<'_>, f: &mut Findings) {
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
    let findings = run.counts.findings();
    for finding in &findings {
        f.flag(
            finding.invariant,
            format!(
                "{} (coupon_sync_stale_admissions_total over {servers})",
                finding.detail
            ),
        );
    }
    for (id, refused_for) in [
        (Invariant::I2, "stock"),
        (Invariant::I3, "the per-user limit"),
    ] {
        if !findings.iter().any(|x| x.invariant == id) {
            f.checked(
                id,
                format!(
                    "no sync claim Redis admitted was refused by Postgres for {refused_for} \
                     ({servers}' /metrics)"
                ),
            );
        }
    }
}
