//! I11 from what the order service was told: no two orders acknowledged as holding one
//! coupon (a lock or a redemption) at the same time. Two acknowledged holds by different
//! orders are a violation only when neither could have ended before the other took effect:
//! no release or refund of either (acknowledged or of unknown outcome) started before the
//! other finished, and neither was a lock that could have lapsed first (a lock holds at
//! least its TTL from the start of its request).

use std::sync::Arc;

use coupon_engine::Invariant;

use super::{Answers, Findings};
use crate::acks::{Event, Op, Outcome};

/// Seconds a checkout lock the run's orders take holds (`scenarios/checkout.rs` asks for
/// it): short, so that abandoned orders lapse within a run. The check must know when a
/// lock lapsed.
pub(crate) const LOCK_TTL_SECS: u64 = 2;

/// Slack for the server's clock against the load generator's (one machine, two clocks).
const CLOCK_SLACK_US: u64 = 500_000;

/// One acknowledged hold of a coupon by an order.
struct Hold<'a> {
    order: &'a Arc<str>,
    start_us: u64,
    end_us: u64,
    lapses: bool,
}

/// I11 over every coupon's owner operations.
pub(super) fn one_live_order(answers: &Answers<'_>, f: &mut Findings) {
    let mut holds_checked = 0usize;
    for (c, es) in &answers.owner_ops {
        let holds: Vec<Hold<'_>> = es
            .iter()
            .filter(|e| matches!(e.op, Op::Lock | Op::Redeem) && e.outcome() == Outcome::Ok)
            .filter_map(|e| {
                Some(Hold {
                    order: e.order_id.as_ref()?,
                    start_us: e.start_us,
                    end_us: e.start_us + e.latency_us,
                    lapses: e.op == Op::Lock,
                })
            })
            .collect();
        holds_checked += holds.len();
        for (i, a) in holds.iter().enumerate() {
            for b in &holds[i + 1..] {
                if a.order != b.order && !may_have_ended(es, a, b) && !may_have_ended(es, b, a) {
                    f.flag(
                        Invariant::I11,
                        format!(
                            "coupon {c} was acknowledged as held by order {} and by order {} at \
                             once: neither was released, refunded or lapsed before the other",
                            a.order, b.order
                        ),
                    );
                }
            }
        }
    }
    f.checked(
        Invariant::I11,
        format!("{holds_checked} acknowledged locks and redemptions: one live order per coupon"),
    );
}

/// Whether `first`'s hold may have ended before `then` took effect: a release or refund of
/// its order that may have acted and started before `then` finished, or its lock's lapse.
fn may_have_ended(ops: &[&Event], first: &Hold<'_>, then: &Hold<'_>) -> bool {
    let ttl_us = LOCK_TTL_SECS * 1_000_000;
    let lapsed = first.lapses && then.end_us + CLOCK_SLACK_US >= first.start_us + ttl_us;
    lapsed
        || ops.iter().any(|e| {
            matches!(e.op, Op::Release | Op::Refund)
                && matches!(e.outcome(), Outcome::Ok | Outcome::Unknown)
                && e.order_id.as_ref() == Some(first.order)
                && e.start_us <= then.end_us
        })
}
