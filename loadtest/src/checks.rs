//! The post-run verdict on invariants I1–I7 (docs/ARCHITECTURE.md, "Invariants"): the
//! auditor's report of every template (I1–I5, from live Redis + Postgres), and what the
//! acknowledgement record implies when compared with the users' coupons read back through
//! the API (I1, I3, I4, I5, I6, I7).
//!
//! Every client-side check is sound: it only flags what must hold whatever happened to the
//! requests whose outcome is unknown (timeouts, 5xx), which are allowed to have taken effect
//! or not.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use coupon_engine::{AuditReport, Coupon, CouponStatus, Invariant, RefundPolicy};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    acks::{Event, Op, Outcome},
    templates::TemplateInfo,
};

/// The verdict on one invariant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct InvariantResult {
    /// `I1` … `I7`.
    pub id: String,
    /// What it means.
    pub title: String,
    /// Whether it held.
    pub passed: bool,
    /// Where the evidence comes from.
    pub sources: String,
    /// What was checked.
    pub checked: Vec<String>,
    /// Violations seen (at most [`MAX_DETAILS`], then a count of the rest).
    pub details: Vec<String>,
}

/// Violations listed per invariant at most.
pub(crate) const MAX_DETAILS: usize = 50;

/// What the checks look at.
pub(crate) struct Evidence<'a> {
    /// The answers users saw that a check compares with anything, in completion order.
    pub events: &'a [Event],
    /// Claims refused at their first attempt, not in `events` (see
    /// [`Event::needed_by_checks`]).
    pub refusals_not_kept: u64,
    /// The run's templates.
    pub templates: &'a [TemplateInfo],
    /// The auditor's report of each template (same order as `templates`).
    pub audits: &'a [AuditReport],
    /// Every shopper's coupons after the run, by user id.
    pub wallets: &'a HashMap<String, Vec<Coupon>>,
}

/// The invariants, their titles and the sources of their evidence.
const INVARIANTS: [(&str, &str, &str); 7] = [
    (
        "I1",
        "No oversell: coupons counting against stock ≤ total stock; Redis stock ≥ 0",
        "auditor + acknowledgements",
    ),
    (
        "I2",
        "Conservation: Redis stock + counted (+ in flight) = total stock",
        "auditor",
    ),
    (
        "I3",
        "Per-user limit held (and equal to Redis' claimed count)",
        "auditor + acknowledgements + wallets",
    ),
    (
        "I4",
        "Single use: at most one live redemption per coupon",
        "auditor + acknowledgements",
    ),
    (
        "I5",
        "Legal transitions only; nobody acts on another user's coupon",
        "auditor + cross-user attempts",
    ),
    (
        "I6",
        "No lost acknowledgement: every acknowledged effect is in the final state; nothing unexplained exists",
        "acknowledgements + wallets",
    ),
    (
        "I7",
        "Idempotency: a retried request (same request id, same order) has no second effect",
        "acknowledgements",
    ),
];

/// Collects findings per invariant.
#[derive(Default)]
struct Findings {
    details: BTreeMap<&'static str, Vec<String>>,
    checked: BTreeMap<&'static str, Vec<String>>,
}

impl Findings {
    fn flag(&mut self, id: &'static str, detail: String) {
        self.details.entry(id).or_default().push(detail);
    }

    fn checked(&mut self, id: &'static str, what: String) {
        self.checked.entry(id).or_default().push(what);
    }

    fn into_results(mut self) -> Vec<InvariantResult> {
        INVARIANTS
            .iter()
            .map(|(id, title, sources)| {
                let mut details = self.details.remove(id).unwrap_or_default();
                if details.len() > MAX_DETAILS {
                    let rest = details.len() - MAX_DETAILS;
                    details.truncate(MAX_DETAILS);
                    details.push(format!("… and {rest} more"));
                }
                InvariantResult {
                    id: (*id).to_owned(),
                    title: (*title).to_owned(),
                    passed: details.is_empty(),
                    sources: (*sources).to_owned(),
                    checked: self.checked.remove(id).unwrap_or_default(),
                    details,
                }
            })
            .collect()
    }
}

fn invariant_id(i: Invariant) -> &'static str {
    match i {
        Invariant::I1 => "I1",
        Invariant::I2 => "I2",
        Invariant::I3 => "I3",
        Invariant::I4 => "I4",
        Invariant::I5 => "I5",
    }
}

/// One claim as the client knows it: every attempt with one idempotency key.
struct ClaimKey<'a> {
    template: Uuid,
    user: Arc<str>,
    request_id: Arc<str>,
    attempts: Vec<&'a Event>,
}

/// The final state a coupon's acknowledged operations imply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    Issued,
    Used(Arc<str>),
    Revoked,
}

/// One line per violated invariant, for the report's "why it failed".
pub(crate) fn failures(invariants: &[InvariantResult]) -> Vec<String> {
    invariants
        .iter()
        .filter(|i| !i.passed)
        .map(|i| {
            format!(
                "{} violated ({} finding(s)): {}",
                i.id,
                i.details.len(),
                i.details.first().map(String::as_str).unwrap_or("")
            )
        })
        .collect()
}

/// Evaluates I1–I7.
pub(crate) fn evaluate(ev: &Evidence<'_>) -> Vec<InvariantResult> {
    let mut f = Findings::default();
    auditor(ev, &mut f);
    let templates: HashMap<Uuid, &TemplateInfo> = ev.templates.iter().map(|t| (t.id, t)).collect();
    let drained: HashSet<Uuid> = ev
        .audits
        .iter()
        .filter(|a| a.pending == 0 && a.outbox_unapplied == 0)
        .map(|a| a.template_id)
        .collect();

    // Claims, grouped by idempotency key, in order.
    let mut keys: BTreeMap<(Uuid, Arc<str>, Arc<str>), ClaimKey<'_>> = BTreeMap::new();
    for e in ev.events.iter().filter(|e| e.op == Op::Claim) {
        if let (Some(t), Some(r)) = (e.template, e.request_id.clone()) {
            keys.entry((t, e.user.clone(), r.clone()))
                .or_insert_with(|| ClaimKey {
                    template: t,
                    user: e.user.clone(),
                    request_id: r,
                    attempts: Vec::new(),
                })
                .attempts
                .push(e);
        }
    }
    // Operations on each coupon: by its owner, and by others.
    let mut owner_ops: HashMap<Uuid, Vec<&Event>> = HashMap::new();
    let mut cross_ops: HashMap<Uuid, Vec<&Event>> = HashMap::new();
    for e in ev.events {
        if let Some(c) = e.coupon {
            match e.op {
                Op::Redeem | Op::Refund => owner_ops.entry(c).or_default().push(e),
                Op::RedeemCrossUser | Op::RefundCrossUser => {
                    cross_ops.entry(c).or_default().push(e)
                }
                Op::Claim | Op::MyCoupons => {}
            }
        }
    }

    let granted = idempotency(&keys, ev.refusals_not_kept, &mut f);
    let refund_attempted = |c: &Uuid| {
        owner_ops
            .get(c)
            .is_some_and(|es| es.iter().any(|e| e.op == Op::Refund))
            || cross_ops.get(c).is_some_and(|es| {
                es.iter().any(|e| {
                    e.op == Op::RefundCrossUser
                        && matches!(e.outcome(), Outcome::Ok | Outcome::Unknown)
                })
            })
    };
    // Coupons certainly still counting against stock and the limit: acknowledged, and
    // never possibly refunded to stock.
    let still_counting = |c: &Uuid, t: &TemplateInfo| {
        t.refund_policy == RefundPolicy::ReturnToUser || !refund_attempted(c)
    };

    // I1 from acknowledgements.
    for t in ev.templates {
        let n = granted
            .iter()
            .filter(|(c, g)| g.template == t.id && still_counting(c, t))
            .count() as i64;
        f.checked(
            "I1",
            format!(
                "{}: {n} acknowledged coupons that no refund could have returned ≤ stock {}",
                t.name, t.total_stock
            ),
        );
        if n > t.total_stock {
            f.flag(
                "I1",
                format!(
                    "{}: {n} distinct coupons acknowledged to clients still count against a stock of {} (oversold by at least {})",
                    t.name,
                    t.total_stock,
                    n - t.total_stock
                ),
            );
        }
    }

    // I3 from acknowledgements and wallets.
    let mut per_user: HashMap<(Uuid, Arc<str>), i64> = HashMap::new();
    for (c, g) in &granted {
        if let Some(t) = templates.get(&g.template)
            && still_counting(c, t)
        {
            *per_user.entry((g.template, g.user.clone())).or_default() += 1;
        }
    }
    for ((tid, user), n) in &per_user {
        if let Some(t) = templates.get(tid)
            && *n > i64::from(t.per_user_limit)
        {
            f.flag(
                "I3",
                format!(
                    "{}: user {user} was acknowledged {n} coupons, limit {}",
                    t.name, t.per_user_limit
                ),
            );
        }
    }
    f.checked(
        "I3",
        format!(
            "{} (user, template) pairs of acknowledged coupons within the limit",
            per_user.len()
        ),
    );
    let mut wallet_pairs = 0usize;
    for (user, coupons) in ev.wallets {
        let mut held: HashMap<Uuid, i64> = HashMap::new();
        for c in coupons {
            if templates.contains_key(&c.template_id) && c.status.counts_against_stock() {
                *held.entry(c.template_id).or_default() += 1;
            }
        }
        for (tid, n) in held {
            wallet_pairs += 1;
            if let Some(t) = templates.get(&tid)
                && n > i64::from(t.per_user_limit)
            {
                f.flag(
                    "I3",
                    format!(
                        "{}: user {user} holds {n} coupons counting against the limit {}",
                        t.name, t.per_user_limit
                    ),
                );
            }
        }
    }
    f.checked(
        "I3",
        format!(
            "{} wallets read back; {wallet_pairs} (user, template) holdings within the limit",
            ev.wallets.len()
        ),
    );

    // I4 from acknowledgements: no two orders acknowledged without a refund between.
    let mut redeemed = 0usize;
    for (c, es) in &owner_ops {
        let mut live: Option<&Arc<str>> = None;
        for e in es {
            match (e.op, e.outcome()) {
                (Op::Redeem, Outcome::Ok) => {
                    redeemed += 1;
                    if let (Some(prev), Some(order)) = (live, e.order_id.as_ref())
                        && prev != order
                    {
                        f.flag(
                            "I4",
                            format!(
                                "coupon {c} (user {}) was acknowledged as redeemed by order {prev} and then by order {order} with no refund between",
                                e.user
                            ),
                        );
                    }
                    live = e.order_id.as_ref();
                }
                (Op::Refund, Outcome::Ok | Outcome::Unknown) => live = None,
                _ => {}
            }
        }
    }
    f.checked(
        "I4",
        format!("{redeemed} acknowledged redemptions: no coupon acknowledged for two live orders"),
    );

    // I5: cross-user attempts.
    let mut cross = 0usize;
    for es in cross_ops.values() {
        for e in es {
            cross += 1;
            if e.outcome() == Outcome::Ok {
                f.flag(
                    "I5",
                    format!(
                        "user {} got HTTP {} for {} of another user's coupon {} (order {})",
                        e.user,
                        e.status.unwrap_or(0),
                        e.op.name(),
                        e.coupon.map(|c| c.to_string()).unwrap_or_default(),
                        e.order_id.as_deref().unwrap_or("-"),
                    ),
                );
            }
        }
    }
    f.checked(
        "I5",
        format!("{cross} cross-user redeem/refund attempts, each must be refused (403)"),
    );

    lost_acks(
        ev, &keys, &granted, &owner_ops, &cross_ops, &drained, &mut f,
    );
    f.into_results()
}

/// The auditor's violations, per invariant.
fn auditor(ev: &Evidence<'_>, f: &mut Findings) {
    for (t, a) in ev.templates.iter().zip(ev.audits) {
        for id in ["I1", "I2", "I3", "I4", "I5"] {
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
            f.flag(
                invariant_id(v.invariant),
                format!("{}: {}", t.name, v.detail),
            );
        }
    }
}

/// A coupon granted by an acknowledged claim.
struct Grant {
    template: Uuid,
    user: Arc<str>,
    request_id: Arc<str>,
}

/// I7 on claims; returns the granted coupons.
fn idempotency(
    keys: &BTreeMap<(Uuid, Arc<str>, Arc<str>), ClaimKey<'_>>,
    refusals_not_kept: u64,
    f: &mut Findings,
) -> HashMap<Uuid, Grant> {
    let mut granted: HashMap<Uuid, Grant> = HashMap::new();
    let mut retried = 0usize;
    for k in keys.values() {
        if k.attempts.len() > 1 {
            retried += 1;
        }
        let mut first: Option<Uuid> = None;
        for e in &k.attempts {
            match (e.outcome(), first) {
                (Outcome::Ok, None) => first = e.coupon,
                (Outcome::Ok, Some(c)) if e.coupon != Some(c) => f.flag(
                    "I7",
                    format!(
                        "user {} request {}: answered coupon {c} and then coupon {}",
                        k.user,
                        k.request_id,
                        e.coupon.map(|c| c.to_string()).unwrap_or_default()
                    ),
                ),
                (Outcome::Refused, Some(c)) => f.flag(
                    "I7",
                    format!(
                        "user {} request {}: granted coupon {c}, then a retry was refused with {} {}",
                        k.user,
                        k.request_id,
                        e.status.unwrap_or(0),
                        e.code.as_deref().unwrap_or("")
                    ),
                ),
                _ => {}
            }
        }
        if let Some(c) = first {
            if let Some(other) = granted.get(&c) {
                f.flag(
                    "I7",
                    format!(
                        "coupon {c} was answered to two claims: user {} request {} and user {} request {}",
                        other.user, other.request_id, k.user, k.request_id
                    ),
                );
            } else {
                granted.insert(
                    c,
                    Grant {
                        template: k.template,
                        user: k.user.clone(),
                        request_id: k.request_id.clone(),
                    },
                );
            }
        }
    }
    f.checked(
        "I7",
        format!(
            "{} claim request ids ({retried} sent more than once): one coupon per request id, the same answer on every retry",
            keys.len() as u64 + refusals_not_kept
        ),
    );
    granted
}

/// I6 (and I7 on redeem/refund repeats): acknowledged effects against the wallets.
fn lost_acks(
    ev: &Evidence<'_>,
    keys: &BTreeMap<(Uuid, Arc<str>, Arc<str>), ClaimKey<'_>>,
    granted: &HashMap<Uuid, Grant>,
    owner_ops: &HashMap<Uuid, Vec<&Event>>,
    cross_ops: &HashMap<Uuid, Vec<&Event>>,
    drained: &HashSet<Uuid>,
    f: &mut Findings,
) {
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
                "I6",
                format!(
                    "acknowledged claim lost: coupon {c} (user {}, request {}) is not among the user's coupons",
                    g.user, g.request_id
                ),
            );
            continue;
        };
        found += 1;
        if coupon.template_id != g.template {
            f.flag(
                "I6",
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
        if others_may_have_acted || ops.iter().any(|e| e.outcome() == Outcome::Unknown) {
            continue;
        }
        state_checked += 1;
        let expected = replay(ops, f);
        let actual = match coupon.status {
            CouponStatus::Issued => Some(Expected::Issued),
            CouponStatus::Used => coupon.order_id.as_deref().map(|o| Expected::Used(o.into())),
            CouponStatus::Revoked => Some(Expected::Revoked),
            CouponStatus::Expired => None,
        };
        if actual.as_ref() != Some(&expected) && coupon.status != CouponStatus::Expired {
            f.flag(
                "I6",
                format!(
                    "coupon {c} (user {}): acknowledged operations imply {expected:?}, the API shows {} (order {})",
                    g.user,
                    coupon.status.as_str(),
                    coupon.order_id.as_deref().unwrap_or("-")
                ),
            );
        }
    }
    // Nothing exists that no client attempted.
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
            if !drained.contains(&c.template_id) {
                continue;
            }
            unexplained_checked += 1;
            let explained = granted
                .get(&c.id)
                .is_some_and(|g| g.user.as_ref() == user.as_str());
            if !explained {
                *extra.entry(c.template_id).or_default() += 1;
            }
        }
        for (tid, n) in extra {
            let allowed = unknown.get(&(tid, user.as_str())).copied().unwrap_or(0);
            if n > allowed {
                f.flag(
                    "I6",
                    format!(
                        "user {user} holds {n} coupon(s) of template {tid} that no acknowledged claim explains ({allowed} claim(s) had an unknown outcome)"
                    ),
                );
            }
        }
    }
    f.checked(
        "I6",
        format!(
            "{} acknowledged claims: {found} found in their user's coupons; {state_checked} coupons' final status matched their acknowledged redeems/refunds; {unexplained_checked} held coupons explained by a claim",
            granted.len()
        ),
    );
    if skipped_undrained > 0 {
        f.checked(
            "I6",
            format!("{skipped_undrained} coupons skipped: their template still had work in flight"),
        );
    }
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
                    "I7",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{acks::tests::ev, templates::Role};
    use coupon_engine::DiscountKind;

    fn template(stock: i64, limit: i32, policy: RefundPolicy) -> TemplateInfo {
        TemplateInfo {
            id: Uuid::new_v4(),
            role: Role::Hot,
            name: "t".into(),
            total_stock: stock,
            per_user_limit: limit,
            refund_policy: policy,
            discount: DiscountKind::Fixed,
            min_order_amount: None,
        }
    }

    fn audit(t: &TemplateInfo) -> AuditReport {
        AuditReport {
            template_id: t.id,
            total_stock: t.total_stock,
            redis_stock: Some(0),
            counted: 0,
            pending: 0,
            outbox_unapplied: 0,
            violations: Vec::new(),
        }
    }

    fn claim(t: &TemplateInfo, user: &str, rid: &str, status: u16, coupon: Option<Uuid>) -> Event {
        let mut e = ev(Op::Claim, user, Some(status), None);
        e.template = Some(t.id);
        e.request_id = Some(rid.into());
        e.coupon = coupon;
        if status == 409 {
            e.code = Some("user_limit".into());
        }
        e
    }

    fn op(kind: Op, t: &TemplateInfo, user: &str, c: Uuid, order: &str, status: u16) -> Event {
        let mut e = ev(kind, user, Some(status), None);
        e.template = Some(t.id);
        e.coupon = Some(c);
        e.order_id = Some(order.into());
        e
    }

    fn wallet_coupon(
        t: &TemplateInfo,
        user: &str,
        id: Uuid,
        status: CouponStatus,
        order: Option<&str>,
    ) -> Coupon {
        let now = time::OffsetDateTime::now_utc();
        Coupon {
            id,
            template_id: t.id,
            user_id: user.into(),
            status,
            order_id: order.map(str::to_owned),
            claimed_at: now,
            valid_from: now,
            valid_until: now + time::Duration::days(30),
            used_at: None,
        }
    }

    fn failed(results: &[InvariantResult]) -> Vec<String> {
        results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.id.clone())
            .collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let t = template(1, 1, RefundPolicy::ReturnToUser);
        let c = Uuid::new_v4();
        let events = vec![
            claim(&t, "a", "r1", 201, Some(c)),
            claim(&t, "a", "r1", 201, Some(c)),
            op(Op::Redeem, &t, "a", c, "o1", 200),
            op(Op::Redeem, &t, "a", c, "o2", 409),
            op(Op::RedeemCrossUser, &t, "b", c, "o3", 403),
            claim(&t, "b", "r2", 409, None),
        ];
        let wallets = HashMap::from([
            (
                "a".to_owned(),
                vec![wallet_coupon(&t, "a", c, CouponStatus::Used, Some("o1"))],
            ),
            ("b".to_owned(), vec![]),
        ]);
        let audits = vec![audit(&t)];
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
        });
        assert!(failed(&r).is_empty(), "{r:#?}");
    }

    #[test]
    fn oversell_double_use_authz_and_lost_acks_are_caught() {
        let t = template(1, 1, RefundPolicy::ReturnToUser);
        let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
        let events = vec![
            claim(&t, "a", "r1", 201, Some(c1)),
            claim(&t, "b", "r2", 201, Some(c2)),
            op(Op::Redeem, &t, "a", c1, "o1", 200),
            op(Op::Redeem, &t, "a", c1, "o2", 200),
            op(Op::RefundCrossUser, &t, "b", c1, "o2", 200),
        ];
        let wallets = HashMap::from([
            (
                "a".to_owned(),
                vec![wallet_coupon(&t, "a", c1, CouponStatus::Issued, None)],
            ),
            ("b".to_owned(), vec![]),
        ]);
        let audits = vec![audit(&t)];
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
        });
        assert_eq!(failed(&r), ["I1", "I4", "I5", "I6"], "{r:#?}");
    }

    #[test]
    fn retries_must_answer_the_same() {
        let t = template(10, 1, RefundPolicy::ReturnToStock);
        let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
        let mut dup = claim(&t, "a", "r1", 409, None);
        dup.duplicate = true;
        let events = vec![
            claim(&t, "a", "r1", 201, Some(c1)),
            dup,
            claim(&t, "b", "r2", 201, Some(c2)),
            claim(&t, "b", "r2", 201, Some(Uuid::new_v4())),
        ];
        let wallets = HashMap::new();
        let audits = vec![audit(&t)];
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
        });
        assert_eq!(failed(&r), ["I7"], "{r:#?}");
        let i7 = r.iter().find(|x| x.id == "I7").map(|x| x.details.len());
        assert_eq!(i7, Some(2));
    }

    #[test]
    fn unknown_outcomes_excuse_extra_coupons_but_not_more() {
        let t = template(10, 5, RefundPolicy::ReturnToStock);
        let mut timeout = claim(&t, "a", "r1", 201, None);
        timeout.status = None;
        let events = vec![timeout];
        let one = HashMap::from([(
            "a".to_owned(),
            vec![wallet_coupon(
                &t,
                "a",
                Uuid::new_v4(),
                CouponStatus::Issued,
                None,
            )],
        )]);
        let audits = vec![audit(&t)];
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &one,
        });
        assert!(failed(&r).is_empty(), "{r:#?}");
        let two = HashMap::from([(
            "a".to_owned(),
            vec![
                wallet_coupon(&t, "a", Uuid::new_v4(), CouponStatus::Issued, None),
                wallet_coupon(&t, "a", Uuid::new_v4(), CouponStatus::Issued, None),
            ],
        )]);
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &two,
        });
        assert_eq!(failed(&r), ["I6"]);
    }

    #[test]
    fn refunds_to_stock_free_the_stock() {
        let t = template(1, 1, RefundPolicy::ReturnToStock);
        let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
        let mut refund = op(Op::Refund, &t, "a", c1, "o1", 200);
        refund.refund_status = Some("revoked".into());
        let events = vec![
            claim(&t, "a", "r1", 201, Some(c1)),
            op(Op::Redeem, &t, "a", c1, "o1", 200),
            refund,
            claim(&t, "b", "r2", 201, Some(c2)),
        ];
        let wallets = HashMap::from([
            (
                "a".to_owned(),
                vec![wallet_coupon(&t, "a", c1, CouponStatus::Revoked, None)],
            ),
            (
                "b".to_owned(),
                vec![wallet_coupon(&t, "b", c2, CouponStatus::Issued, None)],
            ),
        ]);
        let audits = vec![audit(&t)];
        let r = evaluate(&Evidence {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
        });
        assert!(failed(&r).is_empty(), "{r:#?}");
    }
}
