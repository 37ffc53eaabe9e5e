use coupon_engine::{CouponStatus, RefundPolicy};

use super::*;
use crate::{
    acks::{RequestKind, tests::ev},
    templates::Role,
};
use coupon_engine::DiscountKind;
use uuid::Uuid;

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
        claim_window_unix_us: None,
    }
}

fn audit(t: &TemplateInfo) -> AuditReport {
    AuditReport {
        template_id: t.id.into(),
        total_stock: t.total_stock,
        redis_stock: Some(0),
        counted: 0,
        pending: 0,
        outbox_unapplied: 0,
        violations: Vec::new(),
    }
}

fn claim(t: &TemplateInfo, user: &str, rid: &str, status: u16, coupon: Option<Uuid>) -> Reply {
    let mut e = ev(RequestKind::Claim, user, Some(status), None);
    e.template = Some(t.id);
    e.request_id = Some(rid.into());
    e.coupon = coupon;
    if status == 409 {
        e.code = Some("user_limit".into());
    }
    e
}

fn op(kind: RequestKind, t: &TemplateInfo, user: &str, c: Uuid, order: &str, status: u16) -> Reply {
    let mut e = ev(kind, user, Some(status), None);
    e.template = Some(t.id);
    e.coupon = Some(c);
    e.order_id = Some(order.into());
    e
}

fn wallet_coupon(
    t: &TemplateInfo,
    user: &str,
    request_id: &str,
    id: Uuid,
    status: CouponStatus,
    order: Option<&str>,
) -> Coupon {
    let now = time::OffsetDateTime::now_utc();
    Coupon {
        id,
        template_id: t.id.into(),
        user_id: user.into(),
        claim_request_id: request_id.into(),
        status,
        order_id: order.map(str::to_owned),
        locked_until: None,
        claimed_at: now,
        valid_from: now,
        valid_until: now + time::Duration::days(30),
        used_at: None,
    }
}

/// The events answered one after another, 10 ms apart, in the order given.
fn in_order(mut events: Vec<Reply>) -> Vec<Reply> {
    for (i, e) in events.iter_mut().enumerate() {
        e.start_us = i as u64 * 10_000;
    }
    events
}

fn no_stale_admissions() -> RunAdmissions {
    RunAdmissions {
        counts: coupon_engine::StaleAdmissions::default(),
        servers: 1,
        of: 1,
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
    let events = in_order(vec![
        claim(&t, "a", "r1", 201, Some(c)),
        claim(&t, "a", "r1", 201, Some(c)),
        op(RequestKind::Redeem, &t, "a", c, "o1", 200),
        op(RequestKind::Redeem, &t, "a", c, "o2", 409),
        op(RequestKind::RedeemCrossUser, &t, "b", c, "o3", 403),
        claim(&t, "b", "r2", 409, None),
    ]);
    let wallets = HashMap::from([
        (
            "a".to_owned(),
            vec![wallet_coupon(
                &t,
                "a",
                "r1",
                c,
                CouponStatus::Used,
                Some("o1"),
            )],
        ),
        ("b".to_owned(), vec![]),
    ]);
    let audits = vec![audit(&t)];
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &wallets,
        stale_admissions: Some(no_stale_admissions()),
    });
    assert!(failed(&r).is_empty(), "{r:#?}");
}

#[test]
fn oversell_double_use_authz_and_lost_acks_are_caught() {
    let t = template(1, 1, RefundPolicy::ReturnToUser);
    let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
    let events = in_order(vec![
        claim(&t, "a", "r1", 201, Some(c1)),
        claim(&t, "b", "r2", 201, Some(c2)),
        op(RequestKind::Redeem, &t, "a", c1, "o1", 200),
        op(RequestKind::Redeem, &t, "a", c1, "o2", 200),
        op(RequestKind::RefundCrossUser, &t, "b", c1, "o2", 200),
    ]);
    let wallets = HashMap::from([
        (
            "a".to_owned(),
            vec![wallet_coupon(&t, "a", "r1", c1, CouponStatus::Issued, None)],
        ),
        ("b".to_owned(), vec![]),
    ]);
    let audits = vec![audit(&t)];
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &wallets,
        stale_admissions: None,
    });
    assert_eq!(failed(&r), ["I1", "I4", "I5", "I6", "I11"], "{r:#?}");
}

#[test]
fn retries_must_answer_the_same() {
    let t = template(10, 1, RefundPolicy::ReturnToStock);
    let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
    let mut dup = claim(&t, "a", "r1", 409, None);
    dup.duplicate = true;
    let events = in_order(vec![
        claim(&t, "a", "r1", 201, Some(c1)),
        dup,
        claim(&t, "b", "r2", 201, Some(c2)),
        claim(&t, "b", "r2", 201, Some(Uuid::new_v4())),
    ]);
    let wallets = HashMap::from([
        (
            "a".to_owned(),
            vec![wallet_coupon(&t, "a", "r1", c1, CouponStatus::Issued, None)],
        ),
        (
            "b".to_owned(),
            vec![wallet_coupon(&t, "b", "r2", c2, CouponStatus::Issued, None)],
        ),
    ]);
    let audits = vec![audit(&t)];
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &wallets,
        stale_admissions: None,
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
    let events = in_order(vec![timeout]);
    let one = HashMap::from([(
        "a".to_owned(),
        vec![wallet_coupon(
            &t,
            "a",
            "r1",
            Uuid::new_v4(),
            CouponStatus::Issued,
            None,
        )],
    )]);
    let audits = vec![audit(&t)];
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &one,
        stale_admissions: None,
    });
    assert!(failed(&r).is_empty(), "{r:#?}");
    let two = HashMap::from([(
        "a".to_owned(),
        vec![
            wallet_coupon(&t, "a", "r1", Uuid::new_v4(), CouponStatus::Issued, None),
            wallet_coupon(&t, "a", "r9", Uuid::new_v4(), CouponStatus::Issued, None),
        ],
    )]);
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &two,
        stale_admissions: None,
    });
    assert_eq!(failed(&r), ["I6"]);
}

#[test]
fn refunds_to_stock_free_the_stock() {
    let t = template(1, 1, RefundPolicy::ReturnToStock);
    let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
    let mut refund = op(RequestKind::Refund, &t, "a", c1, "o1", 200);
    refund.refund_status = Some("revoked".into());
    let events = in_order(vec![
        claim(&t, "a", "r1", 201, Some(c1)),
        op(RequestKind::Redeem, &t, "a", c1, "o1", 200),
        refund,
        claim(&t, "b", "r2", 201, Some(c2)),
    ]);
    let wallets = HashMap::from([
        (
            "a".to_owned(),
            vec![wallet_coupon(
                &t,
                "a",
                "r1",
                c1,
                CouponStatus::Revoked,
                None,
            )],
        ),
        (
            "b".to_owned(),
            vec![wallet_coupon(&t, "b", "r2", c2, CouponStatus::Issued, None)],
        ),
    ]);
    let audits = vec![audit(&t)];
    let r = evaluate(&RunRecord {
        refusals_not_kept: 0,
        events: &events,
        templates: std::slice::from_ref(&t),
        audits: &audits,
        wallets: &wallets,
        stale_admissions: None,
    });
    assert!(failed(&r).is_empty(), "{r:#?}");
}

#[test]
fn claims_a_stale_redis_admitted_and_postgres_refused_fail_i2_and_i3() {
    // Every answer right and the audit clean: only the servers' counts show that Redis
    // admitted on counters behind Postgres's.
    let t = template(1, 1, RefundPolicy::ReturnToUser);
    let c = Uuid::new_v4();
    let events = in_order(vec![
        claim(&t, "a", "r1", 201, Some(c)),
        claim(&t, "b", "r2", 409, None),
    ]);
    let wallets = HashMap::from([
        (
            "a".to_owned(),
            vec![wallet_coupon(&t, "a", "r1", c, CouponStatus::Issued, None)],
        ),
        ("b".to_owned(), vec![]),
    ]);
    let audits = vec![audit(&t)];
    let evaluate_with = |stock_empty, user_limit| {
        evaluate(&RunRecord {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
            stale_admissions: Some(RunAdmissions {
                counts: coupon_engine::StaleAdmissions {
                    stock_empty,
                    user_limit,
                },
                servers: 2,
                of: 3,
            }),
        })
    };
    assert!(failed(&evaluate_with(0, 0)).is_empty());
    assert_eq!(failed(&evaluate_with(1, 0)), ["I2"]);
    assert_eq!(failed(&evaluate_with(0, 2)), ["I3"]);
    let r = evaluate_with(3, 0);
    let i2 = r.iter().find(|r| r.id == "I2").expect("I2 is judged");
    assert!(
        i2.details[0].contains("3 sync claims") && i2.details[0].contains("2 of 3 servers"),
        "{i2:?}"
    );
}

/// Checkout (I11): two orders acknowledged as holding one coupon at once are caught; a
/// release between, or the first lock's lapse, explains the second.
#[test]
fn two_orders_holding_one_coupon_are_caught_unless_one_let_go() {
    let t = template(10, 10, RefundPolicy::ReturnToUser);
    let c = Uuid::new_v4();
    let at = |mut e: Reply, start_ms: u64| {
        e.start_us = start_ms * 1000;
        e
    };
    let run = |events: Vec<Reply>, status: CouponStatus, order: Option<&str>| {
        let wallets = HashMap::from([(
            "a".to_owned(),
            vec![wallet_coupon(&t, "a", "r1", c, status, order)],
        )]);
        let audits = vec![audit(&t)];
        failed(&evaluate(&RunRecord {
            refusals_not_kept: 0,
            events: &events,
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &wallets,
            stale_admissions: Some(no_stale_admissions()),
        }))
    };
    let claimed = || at(claim(&t, "a", "r1", 201, Some(c)), 0);
    let both = vec![
        claimed(),
        at(op(RequestKind::Lock, &t, "a", c, "o1", 200), 10),
        at(op(RequestKind::Lock, &t, "a", c, "o2", 200), 20),
    ];
    assert!(
        run(both, CouponStatus::Locked, Some("o2")).contains(&"I11".to_owned()),
        "two live locks"
    );
    let released = vec![
        claimed(),
        at(op(RequestKind::Lock, &t, "a", c, "o1", 200), 10),
        at(op(RequestKind::Release, &t, "a", c, "o1", 200), 15),
        at(op(RequestKind::Lock, &t, "a", c, "o2", 200), 20),
        at(op(RequestKind::Redeem, &t, "a", c, "o2", 200), 30),
    ];
    assert!(run(released, CouponStatus::Used, Some("o2")).is_empty());
    let lapsed_ms = LOCK_TTL_SECS * 1000 + 600;
    let lapsed = vec![
        claimed(),
        at(op(RequestKind::Lock, &t, "a", c, "o1", 200), 10),
        at(op(RequestKind::Lock, &t, "a", c, "o2", 200), 10 + lapsed_ms),
    ];
    assert!(run(lapsed, CouponStatus::Locked, Some("o2")).is_empty());
    // An acknowledged release the final state contradicts is a lost acknowledgement.
    let lost_release = vec![
        claimed(),
        at(op(RequestKind::Lock, &t, "a", c, "o1", 200), 10),
        at(op(RequestKind::Release, &t, "a", c, "o1", 200), 15),
    ];
    assert!(run(lost_release, CouponStatus::Locked, Some("o1")).contains(&"I6".to_owned()));
}

/// Every finding of the auditor fails the run, whichever invariant it names: round 2's list
/// had no I12–I14, and their findings were dropped (a rebuild storm, D15, passed).
#[test]
fn every_auditor_finding_fails_the_run() {
    let t = template(1, 1, RefundPolicy::ReturnToUser);
    for id in [
        Invariant::I12,
        Invariant::I13,
        Invariant::I14,
        Invariant::I9,
    ] {
        let mut a = audit(&t);
        a.violations
            .push(coupon_engine::Finding::new(id, "seen by the auditor"));
        let audits = vec![a];
        let r = evaluate(&RunRecord {
            refusals_not_kept: 0,
            events: &[],
            templates: std::slice::from_ref(&t),
            audits: &audits,
            wallets: &HashMap::new(),
            stale_admissions: Some(no_stale_admissions()),
        });
        assert_eq!(failed(&r), [id.id().to_owned()], "{r:#?}");
    }
}
