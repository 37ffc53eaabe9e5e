//! The API operations a shopper performs, each retried with the same ids after a timeout,
//! 5xx or 429, and each attempt's answer recorded in the acknowledgement log.

use std::{sync::Arc, time::Duration};

use goose::prelude::*;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    Ctx,
    call::{self, Req, Resp},
};
use crate::{
    acks::{Event, Op},
    setup::Customer,
};

/// What an operation came to, after its retries.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// 2xx, with the body.
    Ok(Value),
    /// A definitive refusal (its code is in the acknowledgement log).
    Refused,
    /// Nobody knows whether it took effect.
    Unknown,
}

impl Answer {
    /// The coupon id of a granted claim.
    pub(crate) fn coupon(&self) -> Option<Uuid> {
        match self {
            Self::Ok(body) => body
                .get("coupon_id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
            _ => None,
        }
    }

    /// Whether it succeeded.
    pub(crate) fn is_ok(&self) -> bool {
        matches!(self, Self::Ok(_))
    }
}

/// What every attempt of one operation shares in the log.
struct Base<'a> {
    op: Op,
    goose_user: usize,
    customer: &'a Customer,
    template: Option<Uuid>,
    coupon: Option<Uuid>,
    request_id: Option<Arc<str>>,
    order_id: Option<Arc<str>>,
    duplicate: bool,
}

impl Base<'_> {
    fn event(&self, attempt: u32, resp: &Resp) -> Event {
        let coupon = self.coupon.or_else(|| {
            resp.body
                .get("coupon_id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
        });
        let refund_status = (self.op == Op::Refund && resp.ok())
            .then(|| resp.body.get("status").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        Event {
            op: self.op,
            goose_user: self.goose_user,
            user: self.customer.id.clone(),
            template: self.template,
            coupon,
            request_id: self.request_id.clone(),
            order_id: self.order_id.clone(),
            attempt,
            duplicate: self.duplicate,
            start_us: resp.start_us,
            latency_us: resp.latency_us,
            status: resp.status,
            code: resp.code.clone(),
            refund_status,
            error: resp.error.clone(),
            server: resp.server,
        }
    }
}

/// Sends `req` until it has a definitive answer or the retries are spent.
async fn perform(
    user: &mut GooseUser,
    ctx: &Ctx,
    base: &Base<'_>,
    req: &Req<'_>,
) -> Result<Answer, Box<TransactionError>> {
    let mut attempt = 0u32;
    let mut unknown_before = false;
    loop {
        let resp = call::send(user, ctx, req).await?;
        ctx.acks.record(base.event(attempt, &resp));
        if resp.ok() {
            return Ok(Answer::Ok(resp.body));
        }
        let busy = resp.status == Some(429);
        if !resp.retryable() {
            return Ok(Answer::Refused);
        }
        if attempt >= ctx.max_retries {
            return Ok(if busy && !unknown_before {
                Answer::Refused
            } else {
                Answer::Unknown
            });
        }
        unknown_before |= !busy;
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
    }
}

/// Claims a coupon of `template` with idempotency key `request_id`.
pub(crate) async fn claim(
    user: &mut GooseUser,
    ctx: &Ctx,
    goose_user: usize,
    customer: &Customer,
    template: Uuid,
    request_id: &str,
    duplicate: bool,
) -> Result<Answer, Box<TransactionError>> {
    let base = Base {
        op: Op::Claim,
        goose_user,
        customer,
        template: Some(template),
        coupon: None,
        request_id: Some(request_id.into()),
        order_id: None,
        duplicate,
    };
    // A repeat of a granted claim must be granted again, with the same coupon.
    let expected: &[&str] = if duplicate {
        &[]
    } else {
        &["stock_empty", "user_limit"]
    };
    let req = Req {
        op: Op::Claim,
        method: GooseMethod::Post,
        path: format!("/v1/templates/{template}/claims"),
        who: customer,
        bearer: None,
        body: Some(json!({ "request_id": request_id })),
        expected,
    };
    perform(user, ctx, &base, &req).await
}

/// What a redeem or refund acts on.
pub(crate) struct CouponRef {
    /// The coupon.
    pub coupon: Uuid,
    /// Its template.
    pub template: Uuid,
}

/// Redeems `coupon` for `order_id` as `customer` (`op` says whether it is the owner).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn redeem(
    user: &mut GooseUser,
    ctx: &Ctx,
    goose_user: usize,
    customer: &Customer,
    target: &CouponRef,
    order_id: &str,
    order_amount: i64,
    op: Op,
    expected: &[&str],
    duplicate: bool,
) -> Result<Answer, Box<TransactionError>> {
    let base = Base {
        op,
        goose_user,
        customer,
        template: Some(target.template),
        coupon: Some(target.coupon),
        request_id: None,
        order_id: Some(order_id.into()),
        duplicate,
    };
    let req = Req {
        op,
        method: GooseMethod::Post,
        path: format!("/v1/coupons/{}/redeem", target.coupon),
        who: customer,
        // Through the order service when the servers have one: it names the shopper, whose
        // ownership the server still checks (a cross-user redeem stays `not_owner`).
        bearer: ctx.service_token.as_deref(),
        body: Some(match ctx.service_token {
            Some(_) => json!({
                "order_id": order_id, "order_amount": order_amount, "user_id": &*customer.id
            }),
            None => json!({ "order_id": order_id, "order_amount": order_amount }),
        }),
        expected,
    };
    perform(user, ctx, &base, &req).await
}

/// Refunds the redemption of `coupon` by `order_id` as `customer`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn refund(
    user: &mut GooseUser,
    ctx: &Ctx,
    goose_user: usize,
    customer: &Customer,
    target: &CouponRef,
    order_id: &str,
    op: Op,
    expected: &[&str],
    duplicate: bool,
) -> Result<Answer, Box<TransactionError>> {
    let base = Base {
        op,
        goose_user,
        customer,
        template: Some(target.template),
        coupon: Some(target.coupon),
        request_id: None,
        order_id: Some(order_id.into()),
        duplicate,
    };
    let req = Req {
        op,
        method: GooseMethod::Post,
        path: format!("/v1/coupons/{}/refund", target.coupon),
        who: customer,
        bearer: None,
        body: Some(json!({ "order_id": order_id })),
        expected,
    };
    perform(user, ctx, &base, &req).await
}

/// Lists `customer`'s coupons (a read: sent once).
pub(crate) async fn my_coupons(
    user: &mut GooseUser,
    ctx: &Ctx,
    goose_user: usize,
    customer: &Customer,
) -> Result<(), Box<TransactionError>> {
    let req = Req {
        op: Op::MyCoupons,
        method: GooseMethod::Get,
        path: "/v1/users/me/coupons".to_owned(),
        who: customer,
        bearer: None,
        body: None,
        expected: &[],
    };
    let resp = call::send(user, ctx, &req).await?;
    let base = Base {
        op: Op::MyCoupons,
        goose_user,
        customer,
        template: None,
        coupon: None,
        request_id: None,
        order_id: None,
        duplicate: false,
    };
    ctx.acks.record(base.event(0, &resp));
    Ok(())
}
