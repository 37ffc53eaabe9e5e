//! I11 from what the order service was told, judged by the verification core's checker
//! ([`coupon_verify::one_order`]): the owner's locks, redemptions, releases and refunds of
//! each coupon become the core's operations, and a lock lapses [`LOCK_TTL_SECS`] after it
//! was asked for (the server's clock, [`CLOCK_SLACK_US`] off the generator's at most).

use coupon_engine::Invariant;
use coupon_verify::{
    history::{Operation, Outcome as Ended},
    one_order::{LockLapse, check_one_live_order},
    op::{CouponRef, Op as CoreOp, OpResult, Refusal},
};
use uuid::Uuid;

use super::{Answers, Findings};
use crate::acks::{Event, Op, Outcome};

/// Seconds a checkout lock the run's orders take holds (`scenarios/checkout.rs` asks for
/// it): short, so that abandoned orders lapse within a run. The check must know when a
/// lock lapsed.
pub(crate) const LOCK_TTL_SECS: u64 = 2;

/// Slack for the server's clock against the load generator's (one machine, two clocks).
const CLOCK_SLACK_US: u64 = 500_000;

/// I11 over every coupon's owner operations.
pub(super) fn one_live_order(answers: &Answers<'_>, f: &mut Findings) {
    let ops: Vec<Operation> = answers
        .owner_ops
        .iter()
        .flat_map(|(c, es)| es.iter().filter_map(move |e| operation(*c, e)))
        .collect();
    let holds = ops
        .iter()
        .filter(|o| {
            matches!(o.op, CoreOp::Lock { .. } | CoreOp::Redeem { .. })
                && matches!(o.outcome, Ended::Ok(_))
        })
        .count();
    let lapse = LockLapse {
        ttl: LOCK_TTL_SECS * 1_000_000_000,
        slack: CLOCK_SLACK_US * 1_000,
    };
    for finding in check_one_live_order(&ops, Some(lapse)) {
        f.flag(Invariant::I11, finding.detail);
    }
    f.checked(
        Invariant::I11,
        format!("{holds} acknowledged locks and redemptions: one live order per coupon"),
    );
}

/// One owner's answer about coupon `c` as the core's operation (times in nanoseconds); a
/// claim or a read is none.
fn operation(c: Uuid, e: &Event) -> Option<Operation> {
    // The load test knows a redeemed coupon by its id, not by its claim's request id: the
    // id names it here.
    let coupon = CouponRef {
        template: 0,
        request_id: c.to_string(),
    };
    let (user, order_id) = (e.user.to_string(), e.order_id.as_deref()?.to_owned());
    let (op, done) = match e.op {
        Op::Lock => (
            CoreOp::Lock {
                coupon,
                user,
                order_id,
            },
            OpResult::Locked,
        ),
        Op::Redeem => (
            CoreOp::Redeem {
                coupon,
                user,
                order_id,
            },
            OpResult::Redeemed,
        ),
        Op::Release => (
            CoreOp::Release {
                coupon,
                user,
                order_id,
            },
            OpResult::Released,
        ),
        Op::Refund => (
            CoreOp::Refund {
                coupon,
                user,
                order_id,
            },
            OpResult::Refunded,
        ),
        _ => return None,
    };
    let outcome = match e.outcome() {
        Outcome::Ok => Ended::Ok(done),
        Outcome::Busy => Ended::Fail(Refusal::Busy),
        // A refusal the model does not know may not be read as "no effect".
        Outcome::Refused => e
            .code
            .as_deref()
            .and_then(Refusal::from_code)
            .map_or(Ended::Unknown, Ended::Fail),
        Outcome::Unknown => Ended::Unknown,
    };
    Some(Operation {
        process: u32::try_from(e.goose_user).unwrap_or(u32::MAX),
        op,
        call: e.start_us * 1_000,
        ret: (!matches!(outcome, Ended::Unknown)).then(|| e.end_us() * 1_000),
        outcome,
    })
}
