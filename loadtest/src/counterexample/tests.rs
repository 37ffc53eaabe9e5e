use coupon_engine::{DiscountKind, RefundPolicy};

use super::*;
use crate::{acks::tests::ev, templates::Role};

fn template(stock: i64) -> TemplateInfo {
    TemplateInfo {
        id: Uuid::new_v4(),
        role: Role::Hot,
        name: "hot".into(),
        total_stock: stock,
        per_user_limit: 1,
        refund_policy: RefundPolicy::ReturnToUser,
        discount: DiscountKind::Fixed,
        min_order_amount: None,
        claim_window_unix_us: None,
    }
}

fn grant(t: &TemplateInfo, user: usize, end_us: u64) -> Reply {
    let mut e = ev(RequestKind::Claim, &format!("u{user}"), Some(201), None);
    e.goose_user = user;
    e.template = Some(t.id);
    e.request_id = Some(format!("req-{user}").into());
    e.coupon = Some(Uuid::new_v4());
    e.start_us = end_us - 50;
    e.latency_us = 50;
    e
}

fn failed(id: &str, details: &[String]) -> InvariantResult {
    InvariantResult {
        id: id.into(),
        title: "a title".into(),
        passed: false,
        sources: String::new(),
        checked: Vec::new(),
        details: details.to_vec(),
    }
}

fn run<'a>(
    invariants: &'a [InvariantResult],
    events: &'a [Reply],
    templates: &'a [TemplateInfo],
    nemesis: &'a [NemesisEvent],
) -> FailedRun<'a> {
    FailedRun {
        run_id: "run",
        invariants,
        events,
        templates,
        nemesis,
    }
}

#[test]
fn a_run_whose_invariants_hold_has_no_page() {
    let t = template(1);
    let mut ok = failed("I1", &[]);
    ok.passed = true;
    let events = [grant(&t, 1, 100)];
    assert!(html(&run(&[ok], &events, &[t], &[])).is_none());
}

#[test]
fn an_oversell_names_the_grants_acknowledged_past_the_stock() {
    let t = template(2);
    // Completion order 1, 2, 3: the third grant is past a stock of two; a retry of the first
    // (same coupon) is not a coupon more.
    let mut retry = grant(&t, 1, 400);
    retry.coupon = None;
    let first = grant(&t, 1, 100);
    retry.coupon = first.coupon;
    let events = [grant(&t, 3, 300), first, grant(&t, 2, 200), retry];
    let invariants = [failed("I1", &["hot: issued 3, stock 2".to_owned()])];
    let r = run(&invariants, &events, std::slice::from_ref(&t), &[]);
    let named = named(&r, &invariants.iter().collect::<Vec<_>>());
    assert_eq!(named, HashSet::from([0]));
    let page = html(&r).unwrap();
    assert!(page.contains("load run run: violated I1"), "{page}");
    assert!(page.contains("claim req req-3"), "{page}");
    assert!(page.contains("named by the violation"), "{page}");
}

#[test]
fn a_lost_acknowledgement_names_every_answer_about_its_coupon_and_no_other() {
    let t = template(10);
    let lost = grant(&t, 1, 100);
    let coupon = lost.coupon.unwrap();
    let mut redeem = ev(RequestKind::Redeem, "u1", Some(200), None);
    redeem.coupon = Some(coupon);
    redeem.order_id = Some("order-7".into());
    redeem.start_us = 150;
    let events = [lost, grant(&t, 2, 120), redeem, grant(&t, 11, 130)];
    let invariants = [failed(
        "I6",
        &[format!(
            "acknowledged claim lost: coupon {coupon} is not among the user's coupons"
        )],
    )];
    let r = run(&invariants, &events, std::slice::from_ref(&t), &[]);
    assert_eq!(
        named(&r, &invariants.iter().collect::<Vec<_>>()),
        HashSet::from([0, 2])
    );
}

#[test]
fn faults_are_drawn_on_the_nemesis_row_from_their_start_to_their_heal() {
    let step = |at_secs, what: &str, marks| NemesisEvent {
        at_secs,
        what: what.into(),
        failed: false,
        marks,
    };
    let nemesis = [
        step(1.0, "paused redis", Some(Mark::Fault)),
        step(3.5, "resumed redis", Some(Mark::Heal)),
        step(4.0, "snapshot taken", None),
        step(5.0, "killed postgres", Some(Mark::Fault)),
    ];
    let ops = faults(&nemesis);
    assert_eq!(ops.len(), 3);
    assert!(ops.iter().all(|o| o.process == NEMESIS));
    assert_eq!((ops[0].call, ops[0].ret), (1_000_000, Some(3_500_000)));
    assert_eq!(ops[0].recorded, "resumed redis");
    assert_eq!(ops[2].op, "killed postgres");
    assert_eq!(ops[2].ret, None, "a fault never healed runs to the edge");
    let t = template(1);
    let events = [grant(&t, 1, 100)];
    let invariants = [failed("I9", &["no answer".to_owned()])];
    let page = html(&run(
        &invariants,
        &events,
        std::slice::from_ref(&t),
        &nemesis,
    ))
    .unwrap();
    assert!(page.contains(">nemesis<"), "{page}");
    assert!(page.contains("paused redis"), "{page}");
}

#[test]
fn a_page_shows_at_most_its_share_of_a_big_run() {
    let t = template(1);
    let events: Vec<Reply> = (1..=2000).map(|u| grant(&t, u, 100 + u as u64)).collect();
    let invariants = [failed("I1", &["hot: oversold".to_owned()])];
    let r = run(&invariants, &events, std::slice::from_ref(&t), &[]);
    let named = named(&r, &invariants.iter().collect::<Vec<_>>());
    assert_eq!(named.len(), 1999);
    let shown = shown(&events, &named);
    assert_eq!(shown.len(), MOST_SHOWN);
    assert!(
        shown
            .windows(2)
            .all(|w| events[w[0]].start_us <= events[w[1]].start_us)
    );
}

#[test]
fn with_nothing_named_the_runs_last_answers_are_shown() {
    let t = template(10_000);
    let events: Vec<Reply> = (1..=500).map(|u| grant(&t, u, 100 + u as u64)).collect();
    let shown = shown(&events, &HashSet::new());
    assert_eq!(shown.len(), MOST_SHOWN);
    assert_eq!(shown.last(), Some(&499), "the last answer is drawn");
    assert_eq!(shown.first(), Some(&(500 - MOST_SHOWN)));
}
