//! What the history checkers judge, whichever generator recorded it: the operations, the
//! coupons at the end and the templates' settings. The property tests and the load test
//! each build one from what they recorded and run the same checkers on it
//! ([`HISTORY_CHECKERS`]); what only one of them can see (the linearizability search, a
//! case's deadline, a run's restock probe, the servers' counts) is judged beside it.

use crate::{
    ack::{FinalState, check_operations},
    history::Operation,
    invariant::Finding,
    limits::{check_acknowledged_limits, check_held_limits},
    one_order::{LockLapse, check_one_live_order, check_single_use},
    op::TemplateSpec,
    owners::check_owners,
    retries::{RedisCounters, check_retries},
};

/// What the history checkers look at.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Every operation, invoked and completed, in the order the history holds them.
    pub operations: &'a [Operation],
    /// Every coupon once the stores are quiet.
    pub final_state: &'a FinalState,
    /// The templates, by the index the operations name them by.
    pub templates: &'a [TemplateSpec],
    /// When a checkout lock lapses; `None` when every lock outlasts the history.
    pub lock_lapse: Option<LockLapse>,
    /// Whether Redis's counters may have gone stale with no sign while it ran.
    pub redis_counters: RedisCounters,
}

/// A checker of a history: the violations it finds (none: valid).
pub type HistoryChecker = fn(&Evidence<'_>) -> Vec<Finding>;

/// Every checker that reads only a history and its final state, named, in report order.
pub const HISTORY_CHECKERS: [(&str, HistoryChecker); 7] = [
    ("acknowledgements", |e| {
        check_operations(e.operations, e.final_state, e.lock_lapse)
    }),
    ("acknowledged limits", |e| {
        check_acknowledged_limits(e.operations, e.templates)
    }),
    ("held limits", |e| {
        check_held_limits(e.final_state, e.templates)
    }),
    ("single use", |e| check_single_use(e.operations)),
    ("owners", |e| check_owners(e.operations, e.final_state)),
    ("retries", |e| check_retries(e.operations, e.redis_counters)),
    ("one live order", |e| {
        check_one_live_order(e.operations, e.lock_lapse)
    }),
];

impl Evidence<'_> {
    /// Every history checker's findings, in [`HISTORY_CHECKERS`] order.
    #[must_use]
    pub fn findings(&self) -> Vec<Finding> {
        HISTORY_CHECKERS
            .iter()
            .flat_map(|(_, check)| check(self))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ack::{FinalCoupon, FinalStatus},
        history::{Outcome, fixtures::operation},
        invariant::Invariant,
        op::{
            OpResult, Policy,
            fixtures::{claim, coupon},
        },
    };

    fn one_coupon_sale() -> Vec<TemplateSpec> {
        vec![TemplateSpec {
            id: 0,
            stock: 1,
            per_user_limit: 1,
            policy: Policy::ReturnToUser,
        }]
    }

    #[test]
    fn an_empty_history_holds() {
        let final_state = FinalState::default();
        let e = Evidence {
            operations: &[],
            final_state: &final_state,
            templates: &one_coupon_sale(),
            lock_lapse: None,
            redis_counters: RedisCounters::LossesSigned,
        };
        assert!(e.findings().is_empty());
    }

    #[test]
    fn two_coupons_acknowledged_from_a_stock_of_one_are_found() {
        let granted = |user: &str, req: &str, at: u64| {
            operation(
                claim(user, req),
                Outcome::Ok(OpResult::Claimed {
                    coupon: coupon(req),
                }),
                at,
                Some(at + 1),
            )
        };
        let ops = vec![granted("a", "r1", 0), granted("b", "r2", 2)];
        let final_state = FinalState {
            coupons: vec![FinalCoupon {
                template: 0,
                request_id: "r1".into(),
                user: "a".into(),
                status: FinalStatus::Issued,
                live_orders: Vec::new(),
            }],
            ..FinalState::default()
        };
        let e = Evidence {
            operations: &ops,
            final_state: &final_state,
            templates: &one_coupon_sale(),
            lock_lapse: None,
            redis_counters: RedisCounters::LossesSigned,
        };
        let found: Vec<Invariant> = e.findings().iter().map(|f| f.invariant).collect();
        // The oversell (from the acknowledgements) and the lost grant (against the end).
        assert!(found.contains(&Invariant::I1), "{found:?}");
        assert!(found.contains(&Invariant::I6), "{found:?}");
    }
}
