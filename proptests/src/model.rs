//! The pure sequential model of templates, coupons and the use log (docs/ARCHITECTURE.md,
//! "Verification").
//!
//! It mirrors the engine's answers exactly — the Lua claim script's order of checks, the
//! redeem and refund diagnoses, idempotent repeats — but ignores what histories do not
//! exercise: validity windows, expiry, discounts and amounts. Identifier validation is the
//! engine's own (`coupon_engine::domain::ids`), so malformed input is refused the same way.
//! Everything is kept in ordered maps so a [`State`] can be hashed for memoisation.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
};

use coupon_engine::domain::ids::{RequestId, UserId, validate_order_id};

use crate::op::{CouponRef, Op, OpResult, Policy, Refusal, TemplateSpec};

/// Where a coupon is in its life cycle (`expired` is never reached: the model has no clock).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// Held by its owner, usable.
    Issued,
    /// Locked at checkout by this order (its TTL outlasts every case: it never lapses).
    Locked {
        /// The order holding the coupon.
        order: String,
    },
    /// Used by this order.
    Used {
        /// The order holding the coupon.
        order: String,
    },
    /// Refunded under `return_to_stock`: stock and quota went back to the template.
    Revoked,
}

/// One claimed coupon.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Coupon {
    /// The user who claimed it.
    pub owner: String,
    /// Its status.
    pub status: Status,
    /// Every order that ever redeemed it (the use log's UNIQUE (coupon_id, order_id)): a
    /// refunded order cannot redeem the same coupon again.
    pub orders: BTreeSet<String>,
}

/// The state of one template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TemplateState {
    spec: TemplateSpec,
    stock: i64,
    /// Coupons each user holds against the per-user limit.
    held: BTreeMap<String, i64>,
    /// Coupons by the request id that claimed them. A request id is only remembered when
    /// it was granted (the script records outcomes of successful claims only), and the
    /// coupon's owner is the user the request id belongs to.
    coupons: BTreeMap<String, Coupon>,
}

/// The whole model state: every template of a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    templates: BTreeMap<u32, TemplateState>,
}

/// What an operation changes, decided on the state before it (the parameters come from the
/// operation itself). Splitting the decision from the change lets the checker skip copying
/// the state for the many operations that change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Nothing: a refusal or an idempotent repeat.
    None,
    /// A fresh claim: stock and quota deducted, coupon issued.
    Grant,
    /// A fresh redemption: the coupon becomes used by the order.
    Use,
    /// A fresh refund: the coupon goes back to its owner or to stock, per the policy.
    Restore,
    /// A fresh checkout lock: the coupon becomes locked by the order.
    Lock,
    /// A release of a lock the order held: the coupon is issued again.
    Unlock,
}

/// Applies `op` to a copy of `state`: the model's answer and the state after it.
pub fn step(state: &State, op: &Op) -> (OpResult, State) {
    let (answer, effect) = state.answer(op);
    let mut next = state.clone();
    next.commit(op, effect);
    (answer, next)
}

impl State {
    /// The initial state: full stock, nothing claimed.
    pub fn new(specs: &[TemplateSpec]) -> Self {
        let templates = specs
            .iter()
            .map(|spec| (spec.id, TemplateState::new(spec.clone())))
            .collect();
        Self { templates }
    }

    /// Applies `op` in place and answers as the engine would.
    pub fn apply(&mut self, op: &Op) -> OpResult {
        let (answer, effect) = self.answer(op);
        self.commit(op, effect);
        answer
    }

    /// The engine's answer to `op` in this state, and what it would change.
    pub fn answer(&self, op: &Op) -> (OpResult, Effect) {
        let decided = match op {
            Op::Claim {
                template,
                user,
                request_id,
            } => self.claim(*template, user, request_id),
            Op::Redeem {
                coupon,
                user,
                order_id,
            } => self.on_coupon(
                coupon,
                user,
                order_id,
                OpResult::Redeemed,
                TemplateState::redeem,
            ),
            Op::Refund {
                coupon,
                user,
                order_id,
            } => self.on_coupon(
                coupon,
                user,
                order_id,
                OpResult::Refunded,
                TemplateState::refund,
            ),
            Op::Lock {
                coupon,
                user,
                order_id,
            } => self.on_coupon(
                coupon,
                user,
                order_id,
                OpResult::Locked,
                TemplateState::lock,
            ),
            Op::Release {
                coupon,
                user,
                order_id,
            } => self.on_coupon(
                coupon,
                user,
                order_id,
                OpResult::Released,
                TemplateState::release,
            ),
        };
        decided.unwrap_or_else(|refusal| (OpResult::Refused(refusal), Effect::None))
    }

    /// Makes the change [`State::answer`] decided for `op` on this very state (anything else
    /// could break the model's own invariants, hence crate-private).
    pub(crate) fn commit(&mut self, op: &Op, effect: Effect) {
        let Some(t) = self.templates.get_mut(&op.template()) else {
            return;
        };
        match (op, effect) {
            (_, Effect::None) => {}
            (
                Op::Claim {
                    user, request_id, ..
                },
                Effect::Grant,
            ) => t.grant(user, request_id),
            (
                Op::Redeem {
                    coupon, order_id, ..
                },
                Effect::Use,
            ) => {
                t.mark_used(&coupon.request_id, order_id);
            }
            (Op::Refund { coupon, user, .. }, Effect::Restore) => {
                t.restore(&coupon.request_id, user);
            }
            (
                Op::Lock {
                    coupon, order_id, ..
                },
                Effect::Lock,
            ) => t.set_status(
                &coupon.request_id,
                Status::Locked {
                    order: order_id.clone(),
                },
            ),
            (Op::Release { coupon, .. }, Effect::Unlock) => {
                t.set_status(&coupon.request_id, Status::Issued);
            }
            // An effect decided for another kind of operation: nothing to do.
            _ => {}
        }
    }

    /// Remaining stock of a template (`None` if unknown).
    pub fn stock(&self, template: u32) -> Option<i64> {
        self.templates.get(&template).map(|t| t.stock)
    }

    /// Coupons `user` holds against the limit of `template`.
    pub fn held(&self, template: u32, user: &str) -> i64 {
        self.templates
            .get(&template)
            .and_then(|t| t.held.get(user).copied())
            .unwrap_or(0)
    }

    /// The coupon a claim created, if it was granted.
    pub fn coupon(&self, coupon: &CouponRef) -> Option<&Coupon> {
        self.templates
            .get(&coupon.template)?
            .coupons
            .get(&coupon.request_id)
    }

    fn claim(&self, template: u32, user: &str, request_id: &str) -> Decision {
        valid(UserId::parse(user))?;
        valid(RequestId::parse(request_id))?;
        let t = self.templates.get(&template).ok_or(Refusal::NotFound)?;
        let effect = t.claim(user, request_id)?;
        let coupon = CouponRef {
            template,
            request_id: request_id.to_owned(),
        };
        Ok((OpResult::Claimed { coupon }, effect))
    }

    /// An operation of an order on a coupon: input validation, the template, then what the
    /// template's own step (`TemplateState::redeem`, `lock`, …) decides, answered `result`.
    fn on_coupon(
        &self,
        coupon: &CouponRef,
        user: &str,
        order: &str,
        result: OpResult,
        decide: fn(&TemplateState, &str, &str, &str) -> Result<Effect, Refusal>,
    ) -> Decision {
        valid(UserId::parse(user))?;
        valid(validate_order_id(order))?;
        let t = self
            .templates
            .get(&coupon.template)
            .ok_or(Refusal::NotFound)?;
        Ok((result, decide(t, &coupon.request_id, user, order)?))
    }
}

/// An answer with its effect, or a refusal (which never has one).
type Decision = Result<(OpResult, Effect), Refusal>;

/// Input validation fails before anything else, with no effect.
fn valid<T, E>(checked: Result<T, E>) -> Result<(), Refusal> {
    checked.map(drop).map_err(|_| Refusal::InvalidRequest)
}

impl TemplateState {
    fn new(spec: TemplateSpec) -> Self {
        Self {
            stock: spec.stock,
            spec,
            held: BTreeMap::new(),
            coupons: BTreeMap::new(),
        }
    }

    /// The claim script: idempotent repeat, then stock, then the per-user limit.
    fn claim(&self, user: &str, request_id: &str) -> Result<Effect, Refusal> {
        if let Some(coupon) = self.coupons.get(request_id) {
            return if coupon.owner == user {
                Ok(Effect::None)
            } else {
                Err(Refusal::InvalidRequest)
            };
        }
        if self.stock <= 0 {
            return Err(Refusal::StockEmpty);
        }
        if self.held.get(user).copied().unwrap_or(0) >= self.spec.per_user_limit {
            return Err(Refusal::UserLimit);
        }
        Ok(Effect::Grant)
    }

    fn grant(&mut self, user: &str, request_id: &str) {
        *self.held.entry(user.to_owned()).or_insert(0) += 1;
        self.stock -= 1;
        let coupon = Coupon {
            owner: user.to_owned(),
            status: Status::Issued,
            orders: BTreeSet::new(),
        };
        self.coupons.insert(request_id.to_owned(), coupon);
    }

    /// The conditional UPDATE plus its diagnosis.
    fn redeem(&self, request_id: &str, user: &str, order: &str) -> Result<Effect, Refusal> {
        let coupon = owned(self.coupons.get(request_id), user)?;
        match &coupon.status {
            Status::Used { order: o } if o == order => Ok(Effect::None),
            Status::Used { .. } => Err(Refusal::AlreadyUsed),
            Status::Revoked => Err(Refusal::InvalidState),
            Status::Locked { order: o } if o != order => Err(Refusal::Locked),
            // Issued, or locked by this order (its payment).
            _ if coupon.orders.contains(order) => Err(Refusal::InvalidState),
            _ => Ok(Effect::Use),
        }
    }

    /// Checkout's conditional UPDATE plus its diagnosis.
    fn lock(&self, request_id: &str, user: &str, order: &str) -> Result<Effect, Refusal> {
        let coupon = owned(self.coupons.get(request_id), user)?;
        match &coupon.status {
            Status::Issued => Ok(Effect::Lock),
            Status::Locked { order: o } if o == order => Ok(Effect::None),
            Status::Locked { .. } => Err(Refusal::Locked),
            Status::Used { order: o } if o == order => Err(Refusal::InvalidState),
            Status::Used { .. } => Err(Refusal::AlreadyUsed),
            Status::Revoked => Err(Refusal::InvalidState),
        }
    }

    /// A cancel: the order's lock goes; an order that holds none answers success too.
    fn release(&self, request_id: &str, user: &str, order: &str) -> Result<Effect, Refusal> {
        let coupon = owned(self.coupons.get(request_id), user)?;
        match &coupon.status {
            Status::Locked { order: o } if o == order => Ok(Effect::Unlock),
            Status::Locked { .. } => Err(Refusal::Locked),
            Status::Used { order: o } if o == order => Err(Refusal::InvalidState),
            Status::Used { .. } => Err(Refusal::AlreadyUsed),
            Status::Issued | Status::Revoked => Ok(Effect::None),
        }
    }

    fn set_status(&mut self, request_id: &str, status: Status) {
        if let Some(coupon) = self.coupons.get_mut(request_id) {
            coupon.status = status;
        }
    }

    fn mark_used(&mut self, request_id: &str, order: &str) {
        if let Some(coupon) = self.coupons.get_mut(request_id) {
            coupon.status = Status::Used {
                order: order.to_owned(),
            };
            coupon.orders.insert(order.to_owned());
        }
    }

    /// Undo of the redemption by `order`; a repeat of a refund of `order` answers success.
    fn refund(&self, request_id: &str, user: &str, order: &str) -> Result<Effect, Refusal> {
        let coupon = owned(self.coupons.get(request_id), user)?;
        match &coupon.status {
            Status::Used { order: o } if o == order => Ok(Effect::Restore),
            // Not used by this order now: a past redemption by it was refunded.
            _ if coupon.orders.contains(order) => Ok(Effect::None),
            _ => Err(Refusal::InvalidState),
        }
    }

    fn restore(&mut self, request_id: &str, user: &str) {
        let Some(coupon) = self.coupons.get_mut(request_id) else {
            return;
        };
        match self.spec.policy {
            Policy::ReturnToUser => coupon.status = Status::Issued,
            Policy::ReturnToStock => {
                coupon.status = Status::Revoked;
                self.stock += 1;
                self.release_quota(user);
            }
        }
    }

    /// Gives one unit of `user`'s quota back; a count of zero is dropped so that equal
    /// states compare (and hash) equal.
    fn release_quota(&mut self, user: &str) {
        if let Some(held) = self.held.get_mut(user) {
            *held -= 1;
            if *held <= 0 {
                self.held.remove(user);
            }
        }
    }
}

/// The coupon, if it exists and belongs to `user`.
fn owned<'a>(coupon: Option<&'a Coupon>, user: &str) -> Result<&'a Coupon, Refusal> {
    let coupon = coupon.ok_or(Refusal::NotFound)?;
    if coupon.owner == user {
        Ok(coupon)
    } else {
        Err(Refusal::NotOwner)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Issued => f.write_str("issued"),
            Status::Locked { order } => write!(f, "locked by {order}"),
            Status::Used { order } => write!(f, "used by {order}"),
            Status::Revoked => f.write_str("revoked"),
        }
    }
}

impl fmt::Display for State {
    /// One line per template: stock, per-user counts and coupons.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (id, t) in &self.templates {
            write!(f, "t{id}: stock {}; held", t.stock)?;
            for (user, n) in &t.held {
                write!(f, " {user}={n}")?;
            }
            f.write_str("; coupons")?;
            for (req, c) in &t.coupons {
                write!(f, " [{req} of {} {}", c.owner, c.status)?;
                if !c.orders.is_empty() {
                    let orders: Vec<&str> = c.orders.iter().map(String::as_str).collect();
                    write!(f, ", orders {}", orders.join(","))?;
                }
                f.write_str("]")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::op::fixtures::{claim, coupon, lock, redeem, refund, release};

    fn spec(stock: i64, limit: i64, policy: Policy) -> TemplateSpec {
        TemplateSpec {
            id: 0,
            stock,
            per_user_limit: limit,
            policy,
        }
    }

    fn refused(r: Refusal) -> OpResult {
        OpResult::Refused(r)
    }

    /// Applies `op`, asserting the answer, and returns the new state.
    fn expect(state: &State, op: Op, want: OpResult) -> State {
        let (got, next) = step(state, &op);
        assert_eq!(got, want, "{op}");
        if got.refusal().is_some() {
            assert_eq!(&next, state, "a refusal changed the state: {op}");
        }
        next
    }

    fn claimed(req: &str) -> OpResult {
        OpResult::Claimed {
            coupon: coupon(req),
        }
    }

    /// A state where `a` holds coupon `r1`, used by order `o1`.
    fn used(policy: Policy) -> State {
        let s = State::new(&[spec(2, 2, policy)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        expect(&s, redeem("r1", "a", "o1"), OpResult::Redeemed)
    }

    #[test]
    fn claim_deducts_stock_and_quota() {
        let s = State::new(&[spec(2, 1, Policy::ReturnToUser)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        assert_eq!((s.stock(0), s.held(0, "a")), (Some(1), 1));
        let c = s.coupon(&coupon("r1")).unwrap();
        assert_eq!((c.owner.as_str(), &c.status), ("a", &Status::Issued));
    }

    #[test]
    fn claim_retry_is_idempotent_and_bound_to_its_user() {
        let s = State::new(&[spec(1, 1, Policy::ReturnToUser)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        // Same request id: same coupon, even with no stock and the user at the limit.
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        assert_eq!(s.stock(0), Some(0));
        expect(&s, claim("b", "r1"), refused(Refusal::InvalidRequest));
    }

    #[test]
    fn claim_checks_stock_before_limit() {
        let s = State::new(&[spec(1, 1, Policy::ReturnToUser)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        expect(&s, claim("a", "r2"), refused(Refusal::StockEmpty));
        expect(&s, claim("b", "r2"), refused(Refusal::StockEmpty));

        let s = State::new(&[spec(5, 1, Policy::ReturnToUser)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        expect(&s, claim("a", "r2"), refused(Refusal::UserLimit));

        // A refusal leaves no trace, not even a zero count for the user.
        let s = State::new(&[spec(5, 0, Policy::ReturnToUser)]);
        expect(&s, claim("a", "r1"), refused(Refusal::UserLimit));
    }

    #[test]
    fn refused_claim_leaves_request_id_free() {
        let s = State::new(&[spec(1, 1, Policy::ReturnToStock)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        let s = expect(&s, claim("b", "r2"), refused(Refusal::StockEmpty));
        let s = expect(&s, redeem("r1", "a", "o1"), OpResult::Redeemed);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        // Stock came back: the same request id may now succeed.
        expect(&s, claim("b", "r2"), claimed("r2"));
    }

    #[test]
    fn claim_on_unknown_template_or_malformed_ids() {
        let s = State::new(&[spec(1, 1, Policy::ReturnToUser)]);
        let other = Op::Claim {
            template: 9,
            user: "a".into(),
            request_id: "r1".into(),
        };
        expect(&s, other, refused(Refusal::NotFound));
        expect(&s, claim("a|b", "r1"), refused(Refusal::InvalidRequest));
        expect(&s, claim("a", ""), refused(Refusal::InvalidRequest));
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        expect(&s, redeem("r1", "a", ""), refused(Refusal::InvalidRequest));
        expect(&s, refund("r1", "", "o1"), refused(Refusal::InvalidRequest));
    }

    #[test]
    fn redeem_checks_existence_then_owner() {
        let s = State::new(&[spec(1, 1, Policy::ReturnToUser)]);
        expect(&s, redeem("r1", "a", "o1"), refused(Refusal::NotFound));
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        expect(&s, redeem("r1", "b", "o1"), refused(Refusal::NotOwner));
    }

    #[test]
    fn redeem_is_idempotent_per_order_and_exclusive() {
        let s = used(Policy::ReturnToUser);
        let c = s.coupon(&coupon("r1")).unwrap();
        assert_eq!(c.status, Status::Used { order: "o1".into() });
        let s = expect(&s, redeem("r1", "a", "o1"), OpResult::Redeemed);
        expect(&s, redeem("r1", "a", "o2"), refused(Refusal::AlreadyUsed));
    }

    #[test]
    fn refunded_order_cannot_redeem_again_but_another_can() {
        let s = used(Policy::ReturnToUser);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        expect(&s, redeem("r1", "a", "o1"), refused(Refusal::InvalidState));
        let s = expect(&s, redeem("r1", "a", "o2"), OpResult::Redeemed);
        assert_eq!(s.coupon(&coupon("r1")).unwrap().orders.len(), 2);
    }

    #[test]
    fn revoked_coupon_cannot_be_redeemed() {
        let s = used(Policy::ReturnToStock);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        expect(&s, redeem("r1", "a", "o2"), refused(Refusal::InvalidState));
    }

    #[test]
    fn refund_return_to_user_reissues_without_touching_stock() {
        let s = used(Policy::ReturnToUser);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        assert_eq!(s.coupon(&coupon("r1")).unwrap().status, Status::Issued);
        assert_eq!((s.stock(0), s.held(0, "a")), (Some(1), 1));
    }

    #[test]
    fn refund_return_to_stock_revokes_and_returns_stock_and_quota() {
        let s = used(Policy::ReturnToStock);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        assert_eq!(s.coupon(&coupon("r1")).unwrap().status, Status::Revoked);
        assert_eq!((s.stock(0), s.held(0, "a")), (Some(2), 0));
    }

    #[test]
    fn refund_repeat_is_idempotent_with_no_second_effect() {
        for policy in [Policy::ReturnToUser, Policy::ReturnToStock] {
            let s = used(policy);
            let once = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
            let twice = expect(&once, refund("r1", "a", "o1"), OpResult::Refunded);
            assert_eq!(twice, once);
        }
        // Still a success after the coupon moved on to another order.
        let s = used(Policy::ReturnToUser);
        let s = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        let s = expect(&s, redeem("r1", "a", "o2"), OpResult::Redeemed);
        let again = expect(&s, refund("r1", "a", "o1"), OpResult::Refunded);
        assert_eq!(again, s);
    }

    #[test]
    fn refund_refusals() {
        let s = State::new(&[spec(2, 2, Policy::ReturnToUser)]);
        expect(&s, refund("r1", "a", "o1"), refused(Refusal::NotFound));
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        // Issued, never used by this order.
        expect(&s, refund("r1", "a", "o1"), refused(Refusal::InvalidState));
        let s = expect(&s, redeem("r1", "a", "o1"), OpResult::Redeemed);
        expect(&s, refund("r1", "b", "o1"), refused(Refusal::NotOwner));
        // Used by another order.
        expect(&s, refund("r1", "a", "o2"), refused(Refusal::InvalidState));
    }

    #[test]
    fn state_displays_compactly() {
        let s = used(Policy::ReturnToUser);
        assert_eq!(
            s.to_string(),
            "t0: stock 1; held a=1; coupons [r1 of a used by o1, orders o1]\n"
        );
    }

    #[test]
    fn a_locked_coupon_belongs_to_its_order_until_paid_or_released() {
        let s = State::new(&[spec(2, 2, Policy::ReturnToUser)]);
        let s = expect(&s, claim("a", "r1"), claimed("r1"));
        let s = expect(&s, lock("r1", "a", "o1"), OpResult::Locked);
        let s = expect(&s, lock("r1", "a", "o1"), OpResult::Locked);
        let s = expect(&s, lock("r1", "a", "o2"), refused(Refusal::Locked));
        let s = expect(&s, redeem("r1", "a", "o2"), refused(Refusal::Locked));
        let s = expect(&s, release("r1", "a", "o2"), refused(Refusal::Locked));
        let s = expect(&s, lock("r1", "b", "o1"), refused(Refusal::NotOwner));
        // Cancelled: free for the next order; released again, nothing to release.
        let s = expect(&s, release("r1", "a", "o1"), OpResult::Released);
        let s = expect(&s, release("r1", "a", "o1"), OpResult::Released);
        let s = expect(&s, lock("r1", "a", "o2"), OpResult::Locked);
        // Paid by the order holding it; then neither released nor locked again.
        let s = expect(&s, redeem("r1", "a", "o2"), OpResult::Redeemed);
        let s = expect(&s, release("r1", "a", "o2"), refused(Refusal::InvalidState));
        let s = expect(&s, lock("r1", "a", "o2"), refused(Refusal::InvalidState));
        let s = expect(&s, lock("r1", "a", "o3"), refused(Refusal::AlreadyUsed));
        // A refunded order may lock again but never pay with the coupon twice.
        let s = expect(&s, refund("r1", "a", "o2"), OpResult::Refunded);
        let s = expect(&s, lock("r1", "a", "o2"), OpResult::Locked);
        let s = expect(&s, redeem("r1", "a", "o2"), refused(Refusal::InvalidState));
        let s = expect(&s, refund("r1", "a", "o2"), OpResult::Refunded);
        assert_eq!(
            s.coupon(&coupon("r1")).unwrap().status,
            Status::Locked { order: "o2".into() }
        );
    }
}
