//! Acknowledgement checker for I6 and I7 (docs/ARCHITECTURE.md, "Invariants"): compares what
//! clients were told with the final state, read by the runner at quiescence and handed over
//! as plain data.
//!
//! - I6, nothing acknowledged is lost: every acknowledged claim left a coupon owned by its
//!   user; the last acknowledged redeem or refund of a coupon, when nothing could have
//!   overtaken it, is what the coupon shows.
//! - I6, nothing appears unasked: every coupon has a claim some client attempted with its
//!   (template, request id) and user, that was not refused.
//! - I7, retries have no second effect: at most one coupon per (template, request id).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::invariant::{Finding, Invariant};

use crate::{
    history::{History, HistoryError, Operation, Outcome},
    one_order::LockLapse,
    op::{CouponRef, Op, OpResult},
};

/// A coupon's status in the final state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FinalStatus {
    /// Held, unused.
    Issued,
    /// Locked at checkout by `order`.
    Locked {
        /// The order holding it.
        order: String,
    },
    /// Used by `order`.
    Used {
        /// The order holding it.
        order: String,
    },
    /// Past its validity, never used.
    Expired,
    /// Refunded to stock.
    Revoked,
}

/// One coupon of the final state, named like the history names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalCoupon {
    /// Template index in the scenario.
    pub template: u32,
    /// The `claim_request_id` stored with the coupon.
    pub request_id: String,
    /// The owner.
    pub user: String,
    /// The status.
    pub status: FinalStatus,
    /// Orders of its use-log rows with `undone = false`.
    pub live_orders: Vec<String>,
}

impl FinalCoupon {
    /// The coupon's name in histories.
    pub fn coupon_ref(&self) -> CouponRef {
        CouponRef {
            template: self.template,
            request_id: self.request_id.clone(),
        }
    }
}

/// Every coupon that exists at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalState {
    /// The coupons, in any order.
    pub coupons: Vec<FinalCoupon>,
    /// Templates that still had work in flight when the state was read (claims granted and
    /// not yet persisted, refunds not yet applied): what clients were told about them may
    /// not show yet, so their coupons are not compared with it.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unsettled: BTreeSet<u32>,
}

/// Checks I6 and I7 of `history` against `final_state`; empty when both hold.
pub fn check_acks(
    history: &History,
    final_state: &FinalState,
) -> Result<Vec<Finding>, HistoryError> {
    Ok(check_operations(&history.operations()?, final_state, None))
}

/// [`check_acks`] on already paired operations; `lapse` says when a checkout lock ends by
/// itself (`None`: no lock lapses within the run), so that a lapsed lock is not a lost one.
pub fn check_operations(
    ops: &[Operation],
    final_state: &FinalState,
    lapse: Option<LockLapse>,
) -> Vec<Finding> {
    let mut coupons: BTreeMap<CouponRef, Vec<&FinalCoupon>> = BTreeMap::new();
    for coupon in &final_state.coupons {
        coupons.entry(coupon.coupon_ref()).or_default().push(coupon);
    }
    let settled = |template: u32| !final_state.unsettled.contains(&template);
    let settled_ops: Vec<Operation> = ops
        .iter()
        .filter(|op| settled(op.op.template()))
        .cloned()
        .collect();
    let settled_coupons: Vec<FinalCoupon> = final_state
        .coupons
        .iter()
        .filter(|c| settled(c.template))
        .cloned()
        .collect();
    let mut violations = duplicates(&coupons);
    violations.extend(lost_claims(&settled_ops, &coupons));
    violations.extend(unasked_coupons(ops, &settled_coupons));
    violations.extend(lost_uses(&settled_ops, &coupons, lapse.is_some()));
    violations
}

fn violation(invariant: Invariant, detail: String) -> Finding {
    Finding { invariant, detail }
}

/// I7: more than one coupon for one (template, request id).
fn duplicates(coupons: &BTreeMap<CouponRef, Vec<&FinalCoupon>>) -> Vec<Finding> {
    coupons
        .iter()
        .filter(|(_, found)| found.len() > 1)
        .map(|(name, found)| {
            let owners: Vec<&str> = found.iter().map(|c| c.user.as_str()).collect();
            violation(
                Invariant::I7,
                format!(
                    "request {name} issued {} coupons (owners {})",
                    found.len(),
                    owners.join(", ")
                ),
            )
        })
        .collect()
}

/// I6: an acknowledged claim without a coupon owned by its user.
fn lost_claims(
    ops: &[Operation],
    coupons: &BTreeMap<CouponRef, Vec<&FinalCoupon>>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for op in ops {
        let (Op::Claim { user, .. }, Outcome::Ok(OpResult::Claimed { coupon })) =
            (&op.op, &op.outcome)
        else {
            continue;
        };
        let found = coupons.get(coupon).map(Vec::as_slice).unwrap_or_default();
        if found.iter().any(|c| &c.user == user) {
            continue;
        }
        let detail = match found.first() {
            None => {
                format!("acknowledged claim lost: {op} answered claimed {coupon}, no such coupon")
            }
            Some(c) => format!(
                "acknowledged claim lost: {op} answered claimed {coupon}, but it belongs to {}",
                c.user
            ),
        };
        out.push(violation(Invariant::I6, detail));
    }
    out
}

/// I6: a coupon no unrefused claim of its owner asked for.
fn unasked_coupons(ops: &[Operation], coupons: &[FinalCoupon]) -> Vec<Finding> {
    let attempted: BTreeSet<(u32, &str, &str)> = ops
        .iter()
        .filter(|op| !matches!(op.outcome, Outcome::Fail(_)))
        .filter_map(|op| match &op.op {
            Op::Claim {
                template,
                user,
                request_id,
            } => Some((*template, request_id.as_str(), user.as_str())),
            _ => None,
        })
        .collect();
    coupons
        .iter()
        .filter(|c| !attempted.contains(&(c.template, c.request_id.as_str(), c.user.as_str())))
        .map(|c| {
            violation(
                Invariant::I6,
                format!(
                    "coupon {} of {} exists but no claim by {} with that request id \
                     succeeded or ended unknown",
                    c.coupon_ref(),
                    c.user,
                    c.user
                ),
            )
        })
        .collect()
}

/// I6: the last acknowledged redeem or refund of a coupon is not what the coupon shows.
/// Only judged when nothing else could have taken effect after it: no other redeem or
/// refund of the coupon that ended unknown, or succeeded and overlapped it.
fn lost_uses(
    ops: &[Operation],
    coupons: &BTreeMap<CouponRef, Vec<&FinalCoupon>>,
    locks_lapse: bool,
) -> Vec<Finding> {
    let mut touching: BTreeMap<&CouponRef, Vec<&Operation>> = BTreeMap::new();
    for op in ops
        .iter()
        .filter(|op| !matches!(op.outcome, Outcome::Fail(_)))
    {
        if let Some(coupon) = op.op.coupon() {
            touching.entry(coupon).or_default().push(op);
        }
    }
    let mut out = Vec::new();
    for (name, ops) in touching {
        let Some((last, ret)) = last_acknowledged(&ops) else {
            continue;
        };
        let overtaken = ops
            .iter()
            .any(|op| !std::ptr::eq(*op, last) && op.ret.is_none_or(|r| r > last.call));
        let found = coupons.get(name).map(Vec::as_slice).unwrap_or_default();
        if overtaken || found.len() != 1 {
            // Overtaken: nothing to expect. No coupon or several: reported as claims.
            continue;
        }
        if let Some(detail) = contradiction(last, ret, found[0], locks_lapse) {
            out.push(violation(Invariant::I6, detail));
        }
    }
    out
}

/// The acknowledged operation that returned last, with its return time.
fn last_acknowledged<'a>(ops: &[&'a Operation]) -> Option<(&'a Operation, u64)> {
    ops.iter()
        .filter(|op| matches!(op.outcome, Outcome::Ok(_)))
        .filter_map(|op| op.ret.map(|ret| (*op, ret)))
        .max_by_key(|(_, ret)| *ret)
}

/// Why the final coupon contradicts the acknowledged `last` operation, if it does.
fn contradiction(
    last: &Operation,
    ret: u64,
    coupon: &FinalCoupon,
    locks_lapse: bool,
) -> Option<String> {
    let live = |order: &str| coupon.live_orders.iter().any(|o| o == order);
    let lost = match &last.op {
        Op::Redeem { order_id, .. } => {
            let used = coupon.status
                == FinalStatus::Used {
                    order: order_id.clone(),
                };
            (!used || !live(order_id)).then_some("acknowledged redeem lost")
        }
        Op::Refund { order_id, .. } => {
            let used = matches!(coupon.status, FinalStatus::Used { .. });
            (used || live(order_id)).then_some("acknowledged refund lost")
        }
        Op::Lock { order_id, .. } => {
            let locked = coupon.status
                == FinalStatus::Locked {
                    order: order_id.clone(),
                };
            // Paid since (a redeem by the same order returned later) is not a loss.
            let paid = coupon.status
                == FinalStatus::Used {
                    order: order_id.clone(),
                };
            // A lock whose order never paid lapses back to issued (or expires with it).
            let lapsed =
                locks_lapse && matches!(coupon.status, FinalStatus::Issued | FinalStatus::Expired);
            (!locked && !paid && !lapsed).then_some("acknowledged lock lost")
        }
        Op::Release { order_id, .. } => {
            let held = coupon.status
                == FinalStatus::Locked {
                    order: order_id.clone(),
                };
            held.then_some("acknowledged release lost")
        }
        Op::Claim { .. } => None,
    }?;
    Some(format!(
        "{lost}: {last} answered at {ret}, final coupon is {:?} with live orders {:?}",
        coupon.status, coupon.live_orders
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
