//! `flash-sale`: every iteration a shopper races for the one hot template (stock far below
//! demand, per-user limit 1 by default). A granted claim is sometimes sent again with the
//! same request id (it must answer the same coupon) and the wallet sometimes viewed.

use goose::prelude::*;

use super::{Ctx, Session, ops};
use crate::templates::Role;

/// Share of granted shoppers who then look at their wallet.
const VIEW_WALLET: f64 = 0.2;

/// One shopper's attempt.
pub(crate) async fn iteration(
    user: &mut GooseUser,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    let (_, customer) = ctx.customer(s.idx, s.iter);
    let hot = ctx.template(Role::Hot).id;
    let request_id = format!("{}-{}-{}", ctx.tag, s.idx, s.iter);
    let answer = ops::claim(user, ctx, s.idx, customer, hot, &request_id, false).await?;
    if answer.is_ok() {
        if s.rng.chance(ctx.duplicate_rate) {
            ops::claim(user, ctx, s.idx, customer, hot, &request_id, true).await?;
        }
        if s.rng.chance(VIEW_WALLET) {
            ops::my_coupons(user, ctx, s.idx, customer).await?;
        }
    }
    Ok(())
}
