//! `checkout` (the order's side): a shopper claims a coupon and offers it to the run; every
//! journey then places an order with one of the offered coupons — often another journey's,
//! so that one coupon is raced onto several orders at once, mall #1003's shape — and pays
//! (redeem with the same order), cancels (release) or abandons it (its short lock lapses and
//! the sweep gives the coupon back). Cross-user locks must be refused with 403.
//!
//! Orders are placed as the order service does it: for the coupon's owner, with the service
//! token when the servers have one (the owner's own token otherwise).

use std::sync::Mutex;

use goose::prelude::*;

use super::{
    Ctx, Session,
    call::Transport,
    ops::{self, CouponRef, Request, Sender},
};
use crate::{checks::LOCK_TTL_SECS, rng::Rng, templates::Role};

/// Coupons kept on offer for other journeys' orders.
const OFFERED: usize = 64;
/// Share of orders paid; then cancelled; the rest are abandoned.
const PAY: f64 = 0.5;
const CANCEL: f64 = 0.6;
/// Share of journeys in which an intruder tries to place an order with the coupon.
const CROSS_USER: f64 = 0.2;
/// Refusals that are a normal answer to placing an order with an offered coupon: another
/// order holds it, or it was paid with (by another order, or refunded and kept by this one).
const TAKEN: &[&str] = &["locked", "already_used", "invalid_state"];

/// Coupons on offer: (coupon, its template, the index of its owner among the shoppers).
#[derive(Debug, Default)]
pub(crate) struct Offered(Mutex<Vec<(uuid::Uuid, uuid::Uuid, usize)>>);

impl Offered {
    fn offer(&self, coupon: uuid::Uuid, template: uuid::Uuid, owner: usize) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() >= OFFERED {
                v.remove(0);
            }
            v.push((coupon, template, owner));
        }
    }

    fn pick(&self, rng: &mut Rng) -> Option<(uuid::Uuid, uuid::Uuid, usize)> {
        let v = self.0.lock().ok()?;
        if v.is_empty() {
            return None;
        }
        // The newest few most often: those are the ones other journeys race for now.
        let newest = v.len().min(4) as i64;
        let back = rng.range(0, newest - 1) as usize;
        v.get(v.len() - 1 - back).copied()
    }
}

/// One journey: claim and offer a coupon, then place an order with an offered one.
pub(crate) async fn iteration(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    let (n, customer) = ctx.customer(s.idx, s.iter);
    let template = ctx.template(Role::ReturnToUser);
    let me = Sender {
        goose_user: s.idx,
        customer,
    };
    let request_id = format!("{}-{}-{}", ctx.tag, s.idx, s.iter);
    let claimed = ops::send(user, ctx, me, Request::claim(template.id, &request_id)).await?;
    if let Some(coupon) = claimed.coupon() {
        ctx.offered.offer(coupon, template.id, n);
    }
    let Some((coupon, template, owner)) = ctx.offered.pick(&mut s.rng) else {
        return Ok(());
    };
    let target = CouponRef { coupon, template };
    let owner_customer = &ctx.customers[owner];
    let buyer = Sender {
        goose_user: s.idx,
        customer: owner_customer,
    };
    let order = format!("o{}-{}-{}", ctx.tag, s.idx, s.iter);
    if s.rng.chance(CROSS_USER) {
        let intruder = Sender {
            goose_user: s.idx,
            customer: ctx.intruder(owner, &mut s.rng),
        };
        let theirs = format!("{order}-x");
        let attempt = Request::lock(&target, &theirs, LOCK_TTL_SECS)
            .by_intruder()
            .expecting(&["not_owner"]);
        ops::send(user, ctx, intruder, attempt).await?;
    }
    let lock = Request::lock(&target, &order, LOCK_TTL_SECS).expecting(TAKEN);
    if !ops::send(user, ctx, buyer, lock).await?.is_ok() {
        return Ok(());
    }
    if s.rng.chance(ctx.duplicate_rate) {
        let again = Request::lock(&target, &order, LOCK_TTL_SECS).repeated();
        ops::send(user, ctx, buyer, again).await?;
    }
    let amount = s.rng.range(1_000, 100_000);
    if s.rng.chance(PAY) {
        // Paid after its lock lapsed and another order took the coupon: refused, not lost.
        let pay = Request::redeem(&target, &order, amount).expecting(TAKEN);
        ops::send(user, ctx, buyer, pay).await?;
    } else if s.rng.chance(CANCEL) {
        let cancel = Request::release(&target, &order).expecting(TAKEN);
        ops::send(user, ctx, buyer, cancel).await?;
    }
    Ok(())
}
