//! I7 on claims: one coupon per request id, the same answer on every retry.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use coupon_engine::Invariant;
use uuid::Uuid;

use super::{ClaimKey, Findings};
use crate::acks::Outcome;

/// A coupon granted by an acknowledged claim.
pub(super) struct Grant {
    pub template: Uuid,
    pub user: Arc<str>,
    pub request_id: Arc<str>,
}

/// I7 on claims; returns the granted coupons.
pub(super) fn idempotency(
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
                    Invariant::I7,
                    format!(
                        "user {} request {}: answered coupon {c} and then coupon {}",
                        k.user,
                        k.request_id,
                        e.coupon.map(|c| c.to_string()).unwrap_or_default()
                    ),
                ),
                (Outcome::Refused, Some(c)) => f.flag(
                    Invariant::I7,
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
                    Invariant::I7,
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
        Invariant::I7,
        format!(
            "{} claim request ids ({retried} sent more than once): one coupon per request id, the same answer on every retry",
            keys.len() as u64 + refusals_not_kept
        ),
    );
    granted
}
