//! The load run as the verification core's history: every kept answer becomes the core's
//! operation (templates by their index in the run, coupons named by the claim that created
//! them), and the shoppers' coupons read back become its final state. The core judges I1,
//! I3–I7 and I11 from these; nothing here decides whether an invariant held.

use std::collections::HashMap;

use coupon_engine::{Coupon, CouponStatus, RefundPolicy};
use coupon_verify::{
    ack::{FinalCoupon, FinalState, FinalStatus},
    history::{Operation, Outcome as Ended},
    op::{CouponRef, Op as CoreOp, OpResult, Policy, Refusal, TemplateSpec},
};
use uuid::Uuid;

use super::RunRecord;
use crate::acks::{Reply, ReplyClass, RequestKind};

/// What the core checkers read.
pub(super) struct RunHistory {
    /// The kept answers as the core's operations, in completion order (times in ns since
    /// the load began).
    pub ops: Vec<Operation>,
    /// The coupons of the run's templates read back after it.
    pub final_state: FinalState,
    /// The run's templates, by index.
    pub templates: Vec<TemplateSpec>,
    /// Each granted claim's coupon, with the engine id the answer named.
    pub answered_ids: Vec<(CouponRef, String)>,
}

impl RunHistory {
    /// The history of the run `ev` describes.
    pub(super) fn of(ev: &RunRecord<'_>) -> Self {
        let index: HashMap<Uuid, u32> = ev
            .templates
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        let templates = ev
            .templates
            .iter()
            .enumerate()
            .map(|(i, t)| TemplateSpec {
                id: u32::try_from(i).unwrap_or(u32::MAX),
                stock: t.total_stock,
                per_user_limit: i64::from(t.per_user_limit),
                policy: match t.refund_policy {
                    RefundPolicy::ReturnToUser => Policy::ReturnToUser,
                    RefundPolicy::ReturnToStock => Policy::ReturnToStock,
                },
            })
            .collect();
        let final_state = final_state(ev, &index);
        let names = Names::of(ev, &index);
        let mut answered_ids = Vec::new();
        let ops = ev
            .events
            .iter()
            .filter_map(|e| {
                let op = names.operation(e)?;
                if let (Ended::Ok(OpResult::Claimed { coupon }), Some(id)) = (&op.outcome, e.coupon)
                {
                    answered_ids.push((coupon.clone(), id.to_string()));
                }
                Some(op)
            })
            .collect();
        Self {
            ops,
            final_state,
            templates,
            answered_ids,
        }
    }
}

/// The coupons of the run's templates in the shoppers' wallets; a template with work still
/// in flight after the settle is unsettled.
fn final_state(ev: &RunRecord<'_>, index: &HashMap<Uuid, u32>) -> FinalState {
    let coupons = ev
        .wallets
        .values()
        .flatten()
        .filter_map(|c| {
            Some(FinalCoupon {
                template: *index.get(&c.template_id.as_uuid())?,
                request_id: c.claim_request_id.clone(),
                user: c.user_id.clone(),
                status: final_status(c),
                live_orders: match c.status {
                    CouponStatus::Used => c.order_id.clone().into_iter().collect(),
                    _ => Vec::new(),
                },
            })
        })
        .collect();
    let unsettled = ev
        .audits
        .iter()
        .filter(|a| a.pending != 0 || a.outbox_unapplied != 0)
        .filter_map(|a| index.get(&a.template_id.as_uuid()).copied())
        .collect();
    FinalState { coupons, unsettled }
}

fn final_status(c: &Coupon) -> FinalStatus {
    let order = || c.order_id.clone().unwrap_or_default();
    match c.status {
        CouponStatus::Issued => FinalStatus::Issued,
        CouponStatus::Locked => FinalStatus::Locked { order: order() },
        CouponStatus::Used => FinalStatus::Used { order: order() },
        CouponStatus::Expired => FinalStatus::Expired,
        CouponStatus::Revoked => FinalStatus::Revoked,
    }
}

/// The core's name of each coupon the run's answers mention by its engine id: the claim
/// that created it (from the wallets, else from the claim answered with it).
struct Names<'a> {
    index: &'a HashMap<Uuid, u32>,
    by_id: HashMap<Uuid, CouponRef>,
}

impl<'a> Names<'a> {
    fn of(ev: &RunRecord<'_>, index: &'a HashMap<Uuid, u32>) -> Self {
        let mut by_id: HashMap<Uuid, CouponRef> = HashMap::new();
        for c in ev.wallets.values().flatten() {
            if let Some(&template) = index.get(&c.template_id.as_uuid()) {
                by_id.insert(
                    c.id,
                    CouponRef {
                        template,
                        request_id: c.claim_request_id.clone(),
                    },
                );
            }
        }
        for e in ev.events.iter().filter(|e| e.op == RequestKind::Claim) {
            if let (Some(id), Some(t), Some(r)) = (e.coupon, e.template, &e.request_id)
                && let Some(&template) = index.get(&t)
            {
                by_id.entry(id).or_insert_with(|| CouponRef {
                    template,
                    request_id: r.to_string(),
                });
            }
        }
        Self { index, by_id }
    }

    /// A coupon no wallet holds and no claim was answered with keeps its engine id as its
    /// name, on no template of the run, so no check expects anything of it.
    fn coupon(&self, id: Uuid) -> CouponRef {
        self.by_id.get(&id).cloned().unwrap_or_else(|| CouponRef {
            template: u32::MAX,
            request_id: id.to_string(),
        })
    }

    /// One answer as the core's operation; a read of one's coupons is none.
    fn operation(&self, e: &Reply) -> Option<Operation> {
        let user = e.user.to_string();
        let (op, done) = if e.op == RequestKind::Claim {
            let template = *self.index.get(&e.template?)?;
            let request_id = e.request_id.as_deref()?.to_owned();
            let coupon = CouponRef {
                template,
                request_id: request_id.clone(),
            };
            let op = CoreOp::Claim {
                template,
                user,
                request_id,
            };
            (op, OpResult::Claimed { coupon })
        } else {
            let coupon = self.coupon(e.coupon?);
            let order_id = e.order_id.as_deref()?.to_owned();
            match e.op {
                RequestKind::Redeem | RequestKind::RedeemCrossUser => (
                    CoreOp::Redeem {
                        coupon,
                        user,
                        order_id,
                    },
                    OpResult::Redeemed,
                ),
                RequestKind::Refund | RequestKind::RefundCrossUser => (
                    CoreOp::Refund {
                        coupon,
                        user,
                        order_id,
                    },
                    OpResult::Refunded,
                ),
                RequestKind::Lock | RequestKind::LockCrossUser => (
                    CoreOp::Lock {
                        coupon,
                        user,
                        order_id,
                    },
                    OpResult::Locked,
                ),
                RequestKind::Release => (
                    CoreOp::Release {
                        coupon,
                        user,
                        order_id,
                    },
                    OpResult::Released,
                ),
                RequestKind::Claim | RequestKind::MyCoupons => return None,
            }
        };
        let outcome = match e.class() {
            ReplyClass::Ok => Ended::Ok(done),
            ReplyClass::Busy => Ended::Fail(Refusal::Busy),
            // A refusal the model does not know may not be read as "no effect".
            ReplyClass::Refused => e
                .code
                .as_deref()
                .and_then(Refusal::from_code)
                .map_or(Ended::Unknown, Ended::Fail),
            ReplyClass::Unknown => Ended::Unknown,
        };
        Some(Operation {
            process: u32::try_from(e.goose_user).unwrap_or(u32::MAX),
            op,
            call: e.start_us * 1_000,
            ret: (!matches!(outcome, Ended::Unknown)).then(|| e.end_us() * 1_000),
            outcome,
        })
    }
}
