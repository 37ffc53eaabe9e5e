//! I6 (and I7 on redeem/refund repeats): every acknowledged effect is in the final state,
//! and nothing exists that no client attempted.

use std::{collections::HashMap, sync::Arc};

use coupon_engine::{CouponStatus, Invariant};
use uuid::Uuid;

use super::{Answers, Evidence, Findings, claims::Grant};
use crate::acks::{Event, Op, Outcome};

/// The final state a coupon's acknowledged operations imply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    Issued,
    Locked(Arc<str>),
    Used(Arc<str>),
    Revoked,
}

/// I6 (and I7 on redeem/refund repeats): acknowledged effects against the wallets.
pub(super) fn check(
    ev: &Evidence<'_>,
    answers: &Answers<'_>,
    granted: &HashMap<Uuid, Grant>,
    f: &mut Findings,
) {
    let (found, state_checked, skipped_undrained) = acknowledged_claims(ev, answers, granted, f);
    let unexplained_checked = unexplained_coupons(ev, answers, granted, f);
    f.checked(
        Invariant::I6,
        format!(
            "{} acknowledged claims: {found} found in their user's coupons; {state_checked} coupons' final status matched their acknowledged redeems/refunds; {unexplained_checked} held coupons explained by a claim",
            granted.len()
        ),
    );
    if skipped_undrained > 0 {
        f.checked(
            Invariant::I6,
            format!("{skipped_undrained} coupons skipped: their template still had work in flight"),
        );
    }
}

/// Every acknowledged claim is in its user's coupons, in the state its acknowledged
/// redeems and refunds imply. Counts: found, state checked, skipped (template not drained).
fn acknowledged_claims(
    ev: &Evidence<'_>,
    answers: &Answers<'_>,
    granted: &HashMap<Uuid, Grant>,
    f: &mut Findings,
) -> (usize, usize, usize) {
    let Answers {
        owner_ops,
        cross_ops,
        drained,
        ..
    } = answers;
    let mut found = 0usize;
    let mut state_checked = 0usize;
    let mut skipped_undrained = 0usize;
    for (c, g) in granted {
        if !drained.contains(&g.template) {
            skipped_undrained += 1;
            continue;
        }
        let Some(wallet) = ev.wallets.get(g.user.as_ref()) else {
            continue;
        };
        let Some(coupon) = wallet.iter().find(|x| x.id == *c) else {
            f.flag(
                Invariant::I6,
                format!(
                    "acknowledged claim lost: coupon {c} (user {}, request {}) is not among the user's coupons",
                    g.user, g.request_id
                ),
            );
            continue;
        };
        found += 1;
        if coupon.template_id.as_uuid() != g.template {
            f.flag(
                Invariant::I6,
                format!(
                    "coupon {c} belongs to template {} after being claimed from {}",
                    coupon.template_id, g.template
                ),
            );
        }
        let ops = owner_ops.get(c).map(Vec::as_slice).unwrap_or_default();
        let others_may_have_acted = cross_ops.get(c).is_some_and(|es| {
            es.iter()
                .any(|e| matches!(e.outcome(), Outcome::Ok | Outcome::Unknown))
        });
        if others_may_have_acted
            || ops.iter().any(|e| e.outcome() == Outcome::Unknown)
            || acknowledged_side_by_side(ops)
        {
            continue;
        }
        state_checked += 1;
        let expected = replay(ops, f);
        let actual = match coupon.status {
            CouponStatus::Issued => Some(Expected::Issued),
            CouponStatus::Locked => coupon
                .order_id
                .as_deref()
                .map(|o| Expected::Locked(o.into())),
            CouponStatus::Used => coupon.order_id.as_deref().map(|o| Expected::Used(o.into())),
            CouponStatus::Revoked => Some(Expected::Revoked),
            CouponStatus::Expired => None,
        };
        // A lock whose order never paid lapses and is swept back to issued.
        let lapsed = matches!(expected, Expected::Locked(_)) && actual == Some(Expected::Issued);
        if actual.as_ref() != Some(&expected) && coupon.status != CouponStatus::Expired && !lapsed {
            f.flag(
                Invariant::I6,
                format!(
                    "coupon {c} (user {}): acknowledged operations imply {expected:?}, the API shows {} (order {})",
                    g.user,
                    coupon.status.as_str(),
                    coupon.order_id.as_deref().unwrap_or("-")
                ),
            );
        }
    }
    (found, state_checked, skipped_undrained)
}

/// Nothing exists that no client attempted: a held coupon no acknowledged claim explains
/// needs a claim of the same user and template whose outcome is unknown. The coupons looked at.
fn unexplained_coupons(
    ev: &Evidence<'_>,
    answers: &Answers<'_>,
    granted: &HashMap<Uuid, Grant>,
    f: &mut Findings,
) -> usize {
    let Answers { keys, drained, .. } = answers;
    let mut unknown: HashMap<(Uuid, &str), usize> = HashMap::new();
    for k in keys.values() {
        if k.attempts.iter().all(|e| e.outcome() == Outcome::Unknown) {
            *unknown.entry((k.template, k.user.as_ref())).or_default() += 1;
        }
    }
    let mut unexplained_checked = 0usize;
    for (user, coupons) in ev.wallets {
        let mut extra: HashMap<Uuid, usize> = HashMap::new();
        for c in coupons {
            if !drained.contains(&c.template_id.as_uuid()) {
                continue;
            }
            unexplained_checked += 1;
            let explained = granted
                .get(&c.id)
                .is_some_and(|g| g.user.as_ref() == user.as_str());
            if !explained {
                *extra.entry(c.template_id.as_uuid()).or_default() += 1;
            }
        }
        for (tid, n) in extra {
            let allowed = unknown.get(&(tid, user.as_str())).copied().unwrap_or(0);
            if n > allowed {
                f.flag(
                    Invariant::I6,
                    format!(
                        "user {user} holds {n} coupon(s) of template {tid} that no acknowledged claim explains ({allowed} claim(s) had an unknown outcome)"
                    ),
                );
            }
        }
    }
    unexplained_checked
}

/// The status a coupon's owner operations (all with known outcomes) imply; flags
/// repeats of acknowledged redeems/refunds that were refused (I7).
fn replay(ops: &[&Event], f: &mut Findings) -> Expected {
    let mut state = Expected::Issued;
    let mut last_ok: Option<(Op, Arc<str>)> = None;
    for e in ops {
        let Some(order) = e.order_id.clone() else {
            continue;
        };
        match (e.op, e.outcome()) {
            (Op::Redeem, Outcome::Ok) => state = Expected::Used(order.clone()),
            (Op::Lock, Outcome::Ok) => state = Expected::Locked(order.clone()),
            (Op::Release, Outcome::Ok) if state == Expected::Locked(order.clone()) => {
                state = Expected::Issued;
            }
            (Op::Refund, Outcome::Ok) if state == Expected::Used(order.clone()) => {
                state = match e.refund_status.as_deref() {
                    Some("revoked") => Expected::Revoked,
                    _ => Expected::Issued,
                };
            }
            (op, Outcome::Refused)
                if e.duplicate && last_ok.as_ref() == Some(&(op, order.clone())) =>
            {
                let coupon = e.coupon.map(|c| c.to_string()).unwrap_or_default();
                let what = op.name();
                let (status, code) = (e.status.unwrap_or(0), e.code.as_deref().unwrap_or(""));
                f.flag(
                    Invariant::I7,
                    format!(
                        "coupon {coupon} (user {}): {what} for order {order} succeeded, \
                         the same request again was refused with {status} {code}",
                        e.user
                    ),
                );
            }
            _ => {}
        }
        if e.outcome() == Outcome::Ok {
            last_ok = Some((e.op, order));
        }
    }
    state
}

/// Whether two acknowledged operations on the coupon overlapped in time (different Goose
/// users placing orders with one coupon): their order is unknown, so no single replay is
/// the truth.
fn acknowledged_side_by_side(ops: &[&Event]) -> bool {
    let mut acked: Vec<(u64, u64)> = ops
        .iter()
        .filter(|e| e.outcome() == Outcome::Ok)
        .map(|e| (e.start_us, e.start_us + e.latency_us))
        .collect();
    acked.sort_unstable();
    acked.windows(2).any(|w| w[1].0 < w[0].1)
}
