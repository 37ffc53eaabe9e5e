//! `mixed`: several templates at once — a hot one (small stock, refunds return stock so
//! it recirculates), an everyday percent discount (refunds return to the user) and a
//! threshold discount with a minimum order (refunds return stock) — plus wallet browsing.

use goose::prelude::*;

use super::{Ctx, Session, call::Transport, lifecycle::journey, ops};
use crate::templates::Role;

/// One shopper's visit: a journey on a template picked by weight, or browsing.
pub(crate) async fn iteration(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    let (n, customer) = ctx.customer(s.idx, s.iter);
    let role = match s.rng.range(0, 100) {
        0..30 => Role::Hot,
        30..60 => Role::Everyday,
        60..85 => Role::Threshold,
        _ => {
            let me = ops::Sender {
                goose_user: s.idx,
                customer,
            };
            return ops::my_coupons(user, ctx, me).await;
        }
    };
    journey(user, ctx, s, n, customer, ctx.template(role)).await
}
