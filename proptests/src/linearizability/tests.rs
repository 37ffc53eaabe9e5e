//! Hand-made histories the checker must accept or reject, and a timing check on a
//! simulated 6-process × 10-op history.

use std::time::{Duration, Instant};

use super::*;
use crate::op::fixtures::{claim, coupon, redeem, refund};
use crate::{
    history::{Event, EventKind, History, Operation, Outcome},
    model::{State, step},
    op::{Op, OpResult, Policy, Refusal, TemplateSpec},
};

fn spec(stock: i64, limit: i64) -> TemplateSpec {
    TemplateSpec {
        id: 0,
        stock,
        per_user_limit: limit,
        policy: Policy::ReturnToUser,
    }
}

fn init(stock: i64, limit: i64) -> State {
    State::new(&[spec(stock, limit)])
}

fn operation(process: u32, op: Op, call: u64, ret: Option<u64>, outcome: Outcome) -> Operation {
    Operation {
        process,
        op,
        call,
        ret,
        outcome,
    }
}

fn ok(process: u32, op: Op, call: u64, ret: u64, result: OpResult) -> Operation {
    operation(process, op, call, Some(ret), Outcome::Ok(result))
}

fn fail(process: u32, op: Op, call: u64, ret: u64, refusal: Refusal) -> Operation {
    operation(process, op, call, Some(ret), Outcome::Fail(refusal))
}

fn unknown(process: u32, op: Op, call: u64) -> Operation {
    operation(process, op, call, None, Outcome::Unknown)
}

fn claimed(req: &str) -> OpResult {
    OpResult::Claimed {
        coupon: coupon(req),
    }
}

fn verdict(ops: &[Operation], state: &State) -> Verdict {
    check(ops, state, Budget::default())
}

fn assert_accepts(ops: &[Operation], state: &State) {
    assert_eq!(verdict(ops, state), Verdict::Linearizable);
}

/// Asserts a violation and returns its explanation.
fn assert_rejects(ops: &[Operation], state: &State) -> String {
    match verdict(ops, state) {
        Verdict::NotLinearizable { explanation, .. } => {
            println!("{explanation}");
            explanation
        }
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn empty_history_is_linearizable() {
    assert_accepts(&[], &init(1, 1));
}

#[test]
fn accepts_concurrent_claims_completing_in_either_order() {
    // Stock 1: the later-invoked claim won, the earlier one completed first refused.
    let ops = [
        fail(0, claim("a", "ra"), 0, 10, Refusal::StockEmpty),
        ok(1, claim("b", "rb"), 5, 8, claimed("rb")),
    ];
    assert_accepts(&ops, &init(1, 1));
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        fail(1, claim("b", "rb"), 5, 8, Refusal::StockEmpty),
    ];
    assert_accepts(&ops, &init(1, 1));
    // Stock 2: both succeed whichever returns first.
    let ops = [
        ok(0, claim("a", "ra"), 0, 20, claimed("ra")),
        ok(1, claim("b", "rb"), 1, 10, claimed("rb")),
    ];
    assert_accepts(&ops, &init(2, 1));
}

#[test]
fn accepts_unknown_claim_that_took_effect() {
    let ops = [
        unknown(0, claim("a", "ra"), 0),
        fail(1, claim("b", "rb"), 20, 30, Refusal::StockEmpty),
    ];
    assert_accepts(&ops, &init(1, 1));
    // ... and its retry on a fresh process finds the coupon.
    let ops = [
        unknown(0, claim("a", "ra"), 0),
        ok(1, claim("a", "ra"), 20, 30, claimed("ra")),
        fail(2, claim("b", "rb"), 40, 50, Refusal::StockEmpty),
    ];
    assert_accepts(&ops, &init(1, 1));
}

#[test]
fn accepts_unknown_claim_that_took_effect_late() {
    // The unknown claim lands after b's claim although it was invoked long before.
    let ops = [
        unknown(0, claim("a", "ra"), 0),
        ok(1, claim("b", "rb"), 20, 30, claimed("rb")),
        fail(2, claim("c", "rc"), 40, 50, Refusal::StockEmpty),
    ];
    assert_accepts(&ops, &init(2, 1));
}

#[test]
fn accepts_unknown_claim_that_never_took_effect() {
    let ops = [
        unknown(0, claim("a", "ra"), 0),
        ok(1, claim("b", "rb"), 20, 30, claimed("rb")),
        fail(2, redeem("ra", "a", "o1"), 40, 50, Refusal::NotFound),
    ];
    assert_accepts(&ops, &init(1, 1));
}

#[test]
fn accepts_busy_and_invalid_redeems_anywhere() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        fail(1, redeem("ra", "a", "o2"), 12, 18, Refusal::Busy),
        ok(0, redeem("ra", "a", "o1"), 20, 30, OpResult::Redeemed),
        fail(1, redeem("ra", "a", "o3"), 40, 50, Refusal::InvalidRequest),
        fail(1, refund("ra", "a", "o3"), 60, 70, Refusal::Busy),
    ];
    assert_accepts(&ops, &init(1, 1));
}

#[test]
fn accepts_redeem_refund_life_cycle_with_replays() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        ok(0, redeem("ra", "a", "o1"), 20, 30, OpResult::Redeemed),
        ok(1, redeem("ra", "a", "o1"), 25, 35, OpResult::Redeemed),
        ok(0, refund("ra", "a", "o1"), 40, 50, OpResult::Refunded),
        ok(1, refund("ra", "a", "o1"), 45, 60, OpResult::Refunded),
        fail(0, redeem("ra", "a", "o1"), 70, 80, Refusal::InvalidState),
        ok(0, redeem("ra", "a", "o2"), 90, 100, OpResult::Redeemed),
    ];
    assert_accepts(&ops, &init(1, 1));
}

#[test]
fn rejects_two_claims_on_stock_one() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        ok(1, claim("b", "rb"), 5, 15, claimed("rb")),
    ];
    let why = assert_rejects(&ops, &init(1, 5));
    assert!(why.contains("stock_empty"), "{why}");
}

#[test]
fn rejects_one_coupon_redeemed_by_two_orders() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        ok(0, redeem("ra", "a", "o1"), 20, 30, OpResult::Redeemed),
        ok(1, redeem("ra", "a", "o2"), 25, 35, OpResult::Redeemed),
    ];
    let why = assert_rejects(&ops, &init(1, 1));
    assert!(why.contains("already_used"), "{why}");
}

#[test]
fn rejects_stock_empty_with_stock_available() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        fail(1, claim("b", "rb"), 20, 30, Refusal::StockEmpty),
    ];
    let why = assert_rejects(&ops, &init(5, 1));
    assert!(why.contains("1 of 2 completed operations"), "{why}");
    assert!(why.contains("p1 claim t0 by b req rb"), "{why}");
    assert!(why.contains("model answers claimed t0/rb"), "{why}");
}

#[test]
fn rejects_claim_not_visible_to_a_later_redeem() {
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        fail(0, redeem("ra", "a", "o1"), 20, 30, Refusal::NotFound),
    ];
    assert_rejects(&ops, &init(1, 1));
}

#[test]
fn rejects_limit_ignoring_an_earlier_claim() {
    // a's first claim finished before the second was invoked: the limit of 1 must hold.
    let ops = [
        ok(0, claim("a", "r1"), 0, 10, claimed("r1")),
        ok(1, claim("a", "r2"), 20, 30, claimed("r2")),
    ];
    assert_rejects(&ops, &init(5, 1));
    // Had they overlapped, the order would still be forced: one of them must be refused.
    let ops = [
        ok(0, claim("a", "r1"), 0, 30, claimed("r1")),
        ok(1, claim("a", "r2"), 5, 25, claimed("r2")),
    ];
    assert_rejects(&ops, &init(5, 1));
}

#[test]
fn rejects_double_issue_on_retry() {
    // A retry with the same request id must not take a second unit of stock (D7).
    let ops = [
        ok(0, claim("a", "ra"), 0, 10, claimed("ra")),
        ok(0, claim("a", "ra"), 20, 30, claimed("ra")),
        fail(1, claim("b", "rb"), 40, 50, Refusal::StockEmpty),
    ];
    assert_rejects(&ops, &init(2, 5));
}

#[test]
fn rejects_a_claim_taking_another_users_request_id() {
    let ops = [
        ok(0, claim("a", "r1"), 0, 10, claimed("r1")),
        ok(1, claim("b", "r1"), 20, 30, claimed("r1")),
    ];
    assert_rejects(&ops, &init(5, 5));
}

#[test]
fn tiny_budget_is_undecided() {
    let (ops, state) = simulated(7);
    let verdict = check(
        &ops,
        &state,
        Budget {
            max_steps: 1,
            deadline: None,
            ..Budget::default()
        },
    );
    assert!(matches!(verdict, Verdict::Undecided { .. }), "{verdict:?}");
}

#[test]
fn partitioned_check_names_the_violating_template() {
    let other = Op::Claim {
        template: 1,
        user: "a".into(),
        request_id: "x".into(),
    };
    let events = vec![
        event(0, 0, EventKind::Invoke, claim("a", "ra"), None),
        event(1, 1, EventKind::Invoke, other.clone(), None),
        event(2, 0, EventKind::Ok, claim("a", "ra"), Some(claimed("ra"))),
        event(
            3,
            1,
            EventKind::Fail,
            other,
            Some(OpResult::Refused(Refusal::StockEmpty)),
        ),
    ];
    let history = History { events };
    let specs = [
        spec(1, 1),
        TemplateSpec {
            id: 1,
            ..spec(3, 1)
        },
    ];
    let verdict = check_partitioned(&history, &specs, Budget::default());
    match verdict {
        Verdict::NotLinearizable { explanation, .. } => {
            assert!(explanation.starts_with("template 1:"), "{explanation}");
            assert!(!explanation.contains("template 0"), "{explanation}");
        }
        other => panic!("expected a violation, got {other:?}"),
    }
    let specs = [
        spec(1, 1),
        TemplateSpec {
            id: 1,
            ..spec(0, 1)
        },
    ];
    assert!(check_partitioned(&history, &specs, Budget::default()).is_linearizable());
}

#[test]
fn malformed_history_is_undecided() {
    let events = vec![event(0, 0, EventKind::Ok, claim("a", "ra"), None)];
    let verdict = check_partitioned(&History { events }, &[spec(1, 1)], Budget::default());
    assert!(matches!(verdict, Verdict::Undecided { .. }), "{verdict:?}");
}

fn event(index: usize, process: u32, kind: EventKind, op: Op, result: Option<OpResult>) -> Event {
    Event {
        index,
        process,
        kind,
        op,
        result,
        at_nanos: index as u64 * 10,
    }
}

#[test]
fn decides_six_processes_by_ten_ops_quickly() {
    for seed in 1..=8 {
        let (ops, state) = simulated(seed);
        assert_eq!(ops.len(), PROCESSES * ROUNDS);
        let started = Instant::now();
        let verdict = check(&ops, &state, Budget::default());
        let elapsed = started.elapsed();
        println!("seed {seed}: {} ops checked in {elapsed:?}", ops.len());
        assert_eq!(verdict, Verdict::Linearizable, "seed {seed}");
        assert!(elapsed < Duration::from_secs(1), "seed {seed}: {elapsed:?}");
    }
}

#[test]
fn rejects_a_tampered_simulated_history_quickly() {
    for seed in 1..=4 {
        let (mut ops, state) = simulated(seed);
        // After everything else: a redeem of a coupon nobody ever claimed reported as done.
        // Every order of the 60 operations must be ruled out.
        let end = ops.iter().filter_map(|op| op.ret).max().unwrap_or(0);
        ops.push(ok(
            99,
            redeem("ghost", "u0", "o1"),
            end + 1,
            end + 2,
            OpResult::Redeemed,
        ));
        let started = Instant::now();
        let verdict = check(&ops, &state, Budget::default());
        let elapsed = started.elapsed();
        println!("seed {seed}: tampered history rejected in {elapsed:?}");
        assert!(
            matches!(verdict, Verdict::NotLinearizable { .. }),
            "{verdict:?}"
        );
        assert!(elapsed < Duration::from_secs(1), "seed {seed}: {elapsed:?}");
    }
}

const PROCESSES: usize = 6;
const ROUNDS: usize = 10;

/// A deterministic xorshift generator; enough for building test histories.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len().max(1) as u64) as usize)
    }
}

/// A history of a real (linearizable) execution: in each of ten rounds six processes invoke
/// one op each, all overlapping, some overlapping the next round too; the model applied at
/// random linearization points inside the intervals gives the results. About one op in
/// twenty ends unknown, half of them having taken effect.
fn simulated(seed: u64) -> (Vec<Operation>, State) {
    let spec = TemplateSpec {
        id: 0,
        stock: 14,
        per_user_limit: 3,
        policy: Policy::ReturnToStock,
    };
    let init = State::new(std::slice::from_ref(&spec));
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut state = init.clone();
    let mut requests: Vec<(String, String)> = Vec::new();
    let mut ops = Vec::new();
    for round in 0..ROUNDS as u64 {
        let base = round * 1_000;
        let mut batch: Vec<(u64, Operation)> = Vec::new();
        for p in 0..PROCESSES as u64 {
            let op = random_op(&mut rng, p, round, &mut requests);
            let call = base + p * 10;
            let ret = base + 500 + rng.below(700);
            let point = base + 60 + rng.below(430);
            batch.push((
                point,
                operation(p as u32, op, call, Some(ret), Outcome::Unknown),
            ));
        }
        batch.sort_by_key(|(point, _)| *point);
        for (_, mut op) in batch {
            let (answer, next) = step(&state, &op.op);
            let lost = rng.below(20) == 0;
            if !lost || rng.below(2) == 0 {
                state = next;
            }
            op.outcome = match answer.refusal() {
                _ if lost => Outcome::Unknown,
                Some(refusal) => Outcome::Fail(refusal),
                None => Outcome::Ok(answer),
            };
            if lost {
                op.ret = None;
            }
            ops.push(op);
        }
    }
    (ops, init)
}

/// Mostly well-behaved ops with clashes mixed in: retried and stolen request ids, redeems
/// and refunds by the wrong user or with clashing order ids.
fn random_op(rng: &mut Rng, p: u64, round: u64, requests: &mut Vec<(String, String)>) -> Op {
    let stranger = format!("u{}", rng.below(PROCESSES as u64));
    let odd = rng.below(10) == 0;
    let order = format!("o{}", rng.below(4));
    let known = rng.pick(requests).cloned();
    let kind = rng.below(10);
    match known {
        Some((r, owner)) if kind >= 5 => {
            let user = if odd { stranger } else { owner };
            if kind < 8 {
                redeem(&r, &user, &order)
            } else {
                refund(&r, &user, &order)
            }
        }
        known => {
            let (request_id, user) = match known {
                Some((r, owner)) if rng.below(4) == 0 => (r, if odd { stranger } else { owner }),
                _ => (format!("p{p}-r{round}"), format!("u{p}")),
            };
            requests.push((request_id.clone(), user.clone()));
            claim(&user, &request_id)
        }
    }
}
