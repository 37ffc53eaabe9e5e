//! The engine's sequential model ([`crate::model`]) as a [`Model`], and the I8 checks the
//! property tests run: per template, from the scenario's template specs.

use std::fmt;

use super::{Budget, Completion, Model, TimedOp, Verdict, check_from, check_history};
use crate::{
    history::{History, Operation, Outcome},
    model::{Effect, State},
    op::{Op, OpResult, Refusal, TemplateSpec},
};

/// The coupon engine's model, partitioned by template.
#[derive(Debug, Clone, Default)]
pub struct Coupons {
    /// The templates of the scenario; each partition starts from its own spec.
    pub specs: Vec<TemplateSpec>,
}

/// A template index, as a partition key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Template(pub u32);

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "template {}", self.0)
    }
}

impl Model for Coupons {
    type Key = Template;
    type Input = Op;
    type Output = Outcome;
    type Answer = OpResult;
    type State = State;

    fn partition(&self, op: &Op) -> Template {
        Template(op.template())
    }

    fn init(&self, key: &Template) -> State {
        let own: Vec<TemplateSpec> = self
            .specs
            .iter()
            .filter(|s| s.id == key.0)
            .cloned()
            .collect();
        State::new(&own)
    }

    fn step(&self, state: &State, op: &Op) -> (OpResult, Option<State>) {
        let (answer, effect) = state.answer(op);
        if effect == Effect::None {
            return (answer, None);
        }
        let mut next = state.clone();
        next.commit(op, effect);
        (answer, Some(next))
    }

    fn matches(&self, recorded: &Outcome, answer: &OpResult) -> bool {
        match recorded {
            Outcome::Ok(result) => result == answer,
            Outcome::Fail(refusal) => answer.refusal() == Some(*refusal),
            Outcome::Unknown => true,
        }
    }

    /// Refusals the model cannot predict but that certainly changed nothing: `busy` (the
    /// redeem lock was held), and `invalid_request` on a redeem or refund (input validation,
    /// e.g. a negative order amount the model does not see). A claim's `invalid_request` is
    /// checked: the model answers it for malformed ids and for a request id owned by another
    /// user.
    fn no_effect(&self, op: &Op, recorded: &Outcome) -> bool {
        match recorded {
            Outcome::Fail(Refusal::Busy) => true,
            Outcome::Fail(Refusal::InvalidRequest) => !matches!(op, Op::Claim { .. }),
            _ => false,
        }
    }

    /// Always: a refusal changes nothing anywhere, and an idempotent repeat stays one — a
    /// granted request id is never forgotten, and an order that once redeemed a coupon can
    /// never redeem it for the first time again (the use log keeps it).
    fn settled_when_idle(&self, _: &Op, _: &Outcome) -> bool {
        true
    }

    fn describe(&self, state: &State) -> String {
        state.to_string()
    }
}

/// A recorded operation in the checker's terms; `unknown` outcomes have no completion.
fn timed(op: &Operation) -> TimedOp<Op, Outcome> {
    let completion = match (&op.outcome, op.ret) {
        (Outcome::Unknown, _) | (_, None) => None,
        (outcome, Some(at)) => Some(Completion {
            at,
            output: outcome.clone(),
        }),
    };
    TimedOp {
        process: u64::from(op.process),
        input: op.op.clone(),
        call: op.call,
        completion,
    }
}

/// Checks the operations of one partition against the model, starting from `init`.
pub fn check(ops: &[Operation], init: &State, budget: Budget) -> Verdict {
    let ops: Vec<_> = ops.iter().map(timed).collect();
    check_from(&Coupons::default(), &ops, init.clone(), budget)
}

/// Checks a whole history, each template on its own (an operation only touches its
/// template's state), under one shared budget. Any violation wins, naming its template;
/// otherwise any undecided partition makes the whole check undecided.
pub fn check_partitioned(history: &History, specs: &[TemplateSpec], budget: Budget) -> Verdict {
    let ops = match history.operations() {
        Ok(ops) => ops,
        Err(e) => {
            return Verdict::Undecided {
                reason: format!("malformed history: {e}"),
                limit: None,
            };
        }
    };
    let ops: Vec<_> = ops.iter().map(timed).collect();
    let model = Coupons {
        specs: specs.to_vec(),
    };
    check_history(&model, &ops, budget)
}
