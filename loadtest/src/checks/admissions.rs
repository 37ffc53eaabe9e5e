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
    for (id, n, refused_for, counter) in [
        (
            Invariant::I2,
            run.counts.stock_empty,
            "stock",
            "stock counter",
        ),
        (
            Invariant::I3,
            run.counts.user_limit,
            "the per-user limit",
            "per-user count",
        ),
    ] {
        if n > 0 {
            f.flag(
                id,
                format!(
                    "Redis admitted {n} sync claims that Postgres refused for {refused_for}: \
                     its {counter} was behind Postgres's when it admitted them \
                     (coupon_sync_stale_admissions_total over {servers})"
                ),
            );
        } else {
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
