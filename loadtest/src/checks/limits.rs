//! I1 and I3 from what clients were told: no more coupons acknowledged than the stock, no
//! user acknowledged (or holding) more than the limit.

use std::{collections::HashMap, sync::Arc};

use coupon_engine::Invariant;
use uuid::Uuid;

use super::{Answers, Evidence, Findings, claims::Grant};

/// I1 from acknowledgements.
pub(super) fn stock(
    ev: &Evidence<'_>,
    answers: &Answers<'_>,
    granted: &HashMap<Uuid, Grant>,
    f: &mut Findings,
) {
    for t in ev.templates {
        let n = granted
            .iter()
            .filter(|(c, g)| g.template == t.id && answers.still_counting(c, t))
            .count() as i64;
        f.checked(
            Invariant::I1,
            format!(
                "{}: {n} acknowledged coupons that no refund could have returned ≤ stock {}",
                t.name, t.total_stock
            ),
        );
        if n > t.total_stock {
            f.flag(
                Invariant::I1,
                format!(
                    "{}: {n} distinct coupons acknowledged to clients still count against a stock of {} (oversold by at least {})",
                    t.name,
                    t.total_stock,
                    n - t.total_stock
                ),
            );
        }
    }
}

/// I3 from acknowledgements and wallets.
pub(super) fn per_user(
    ev: &Evidence<'_>,
    answers: &Answers<'_>,
    granted: &HashMap<Uuid, Grant>,
    f: &mut Findings,
) {
    let templates = &answers.templates;
    let mut per_user: HashMap<(Uuid, Arc<str>), i64> = HashMap::new();
    for (c, g) in granted {
        if let Some(t) = templates.get(&g.template)
            && answers.still_counting(c, t)
        {
            *per_user.entry((g.template, g.user.clone())).or_default() += 1;
        }
    }
    for ((tid, user), n) in &per_user {
        if let Some(t) = templates.get(tid)
            && *n > i64::from(t.per_user_limit)
        {
            f.flag(
                Invariant::I3,
                format!(
                    "{}: user {user} was acknowledged {n} coupons, limit {}",
                    t.name, t.per_user_limit
                ),
            );
        }
    }
    f.checked(
        Invariant::I3,
        format!(
            "{} (user, template) pairs of acknowledged coupons within the limit",
            per_user.len()
        ),
    );
    let mut wallet_pairs = 0usize;
    for (user, coupons) in ev.wallets {
        let mut held: HashMap<Uuid, i64> = HashMap::new();
        for c in coupons {
            let tid = c.template_id.as_uuid();
            if templates.contains_key(&tid) && c.status.counts_against_stock() {
                *held.entry(tid).or_default() += 1;
            }
        }
        for (tid, n) in held {
            wallet_pairs += 1;
            if let Some(t) = templates.get(&tid)
                && n > i64::from(t.per_user_limit)
            {
                f.flag(
                    Invariant::I3,
                    format!(
                        "{}: user {user} holds {n} coupons counting against the limit {}",
                        t.name, t.per_user_limit
                    ),
                );
            }
        }
    }
    f.checked(
        Invariant::I3,
        format!(
            "{} wallets read back; {wallet_pairs} (user, template) holdings within the limit",
            ev.wallets.len()
        ),
    );
}
