//! The auditor's report of each template (I1–I5, I12–I14, from live Redis and Postgres).

use coupon_engine::Invariant;

use super::{Findings, RunRecord};

/// The auditor's violations, per invariant.
pub(super) fn check(ev: &RunRecord<'_>, f: &mut Findings) {
    for (t, a) in ev.templates.iter().zip(ev.audits) {
        for id in [
            Invariant::I1,
            Invariant::I2,
            Invariant::I3,
            Invariant::I4,
            Invariant::I5,
            Invariant::I12,
            Invariant::I13,
            Invariant::I14,
        ] {
            f.checked(
                id,
                format!(
                    "auditor on {}: total {}, counted {}, redis stock {}, pending {}, unapplied refunds {}",
                    t.name,
                    a.total_stock,
                    a.counted,
                    a.redis_stock.map_or_else(|| "absent".to_owned(), |s| s.to_string()),
                    a.pending,
                    a.outbox_unapplied
                ),
            );
        }
        for v in &a.violations {
            f.flag(v.invariant, format!("{}: {}", t.name, v.detail));
        }
    }
}
