//! `flash-sale`: every iteration a shopper races for the one hot template (stock far below
//! demand, per-user limit 1 by default). A granted claim is sometimes sent again with the
//! same request id (it must answer the same coupon), at once or on the shopper's next visit
//! (a late retry, which meets the sale sold out: a server that answers the sold-out flood
//! itself must still give it its coupon), and the wallet sometimes viewed.

use goose::prelude::*;

use super::{
    Ctx, LateRetry, Session,
    call::Transport,
    ops::{self, Request, Sender},
};

/// Visits a late retry waits: some hundreds of milliseconds at the usual pace, so that most
/// arrive after the sale sold out.
const LATE_RETRY_AFTER: u64 = 100;

/// Share of granted shoppers who then look at their wallet.
const VIEW_WALLET: f64 = 0.2;

/// One shopper's attempt.
pub(crate) async fn iteration(
    user: &mut impl Transport,
    ctx: &Ctx,
    s: &mut Session,
) -> TransactionResult {
    if let Some(late) = s.late_retry.take_if(|l| l.due <= s.iter) {
        let earlier = Sender {
            goose_user: s.idx,
            customer: &ctx.customers[late.shopper],
        };
        let retry = Request::claim(late.template, &late.request_id).repeated();
        ops::send(user, ctx, earlier, retry).await?;
    }
    let hot = ctx.hot_template(s.idx, s.iter);
    let (n, customer) = ctx.customer(s.idx, s.iter);
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
        } else if s.rng.chance(ctx.duplicate_rate) {
            s.late_retry = Some(LateRetry {
                due: s.iter + LATE_RETRY_AFTER,
                shopper: n,
                template: hot,
                request_id: request_id.clone(),
            });
        }
        if s.rng.chance(VIEW_WALLET) {
            ops::my_coupons(user, ctx, me).await?;
        }
    }
    Ok(())
}
