//! `flash-sale`: every iteration a shopper races for the one hot template (stock far below
//! demand, per-user limit 1 by default). A granted claim is sometimes sent again with the
//! same request id (it must answer the same coupon) and the wallet sometimes viewed.

use goose::prelude::*;

use super::{
    Ctx, Session,
    call::Transport,
    ops::{self, Request, Sender},
};
use crate::templates::Role;

/// Share of granted shoppers who then look at their wallet.
const VIEW_WALLET: f64 = 0.2;

/// One shopper's attempt.
pub(crate) async fn iteration(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    let (_, customer) = ctx.customer(s.idx, s.iter);
    let hot = ctx.template(Role::Hot).id;
    let request_id = format!("{}-{}-{}", ctx.tag, s.idx, s.iter);
    let me = Sender {
        goose_user: s.idx,
        customer,
    };
    let claim = || Request::claim(hot, &request_id);
    let answer = ops::send(user, ctx, me, claim()).await?;
    if answer.is_ok() {
        if s.rng.chance(ctx.duplicate_rate) {
            ops::send(user, ctx, me, claim().repeated()).await?;
        }
        if s.rng.chance(VIEW_WALLET) {
            ops::my_coupons(user, ctx, me).await?;
        }
    }
    Ok(())
}
