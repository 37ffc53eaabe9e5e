//! The API operations a shopper performs, each retried with the same ids after a timeout,
//! 5xx or 429, and each attempt's answer recorded in the acknowledgement log.

use std::{sync::Arc, time::Duration};

use goose::prelude::*;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    Ctx,
    call::{Req, Resp, Transport},
};
use crate::{
    acks::{Reply, RequestKind},
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
    op: RequestKind,
    goose_user: usize,
    customer: &'a Customer,
    template: Option<Uuid>,
    coupon: Option<Uuid>,
    request_id: Option<Arc<str>>,
    order_id: Option<Arc<str>>,
    duplicate: bool,
}

impl Base<'_> {
    fn event(&self, attempt: u32, resp: &Resp) -> Reply {
        let coupon = self.coupon.or_else(|| {
            resp.body
                .get("coupon_id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
        });
        let refund_status = (self.op == RequestKind::Refund && resp.ok())
            .then(|| resp.body.get("status").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        Reply {
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
    user: &mut impl Transport,
    ctx: &Ctx,
    base: &Base<'_>,
    req: &Req<'_>,
) -> Result<Answer, Box<TransactionError>> {
    let mut attempt = 0u32;
    let mut unknown_before = false;
    loop {
        let resp = user.send(ctx, req).await?;
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

/// Who sends a request: a Goose user, acting as one shopper.
#[derive(Clone, Copy)]
pub(crate) struct Sender<'a> {
    /// Index of the Goose user.
    pub goose_user: usize,
    /// The shopper whose token is used.
    pub customer: &'a Customer,
}

/// What a redeem or refund acts on.
pub(crate) struct CouponRef {
    /// The coupon.
    pub coupon: Uuid,
    /// Its template.
    pub template: Uuid,
}

/// What a request does.
enum Action<'a> {
    /// Claim a coupon of `template` with idempotency key `request_id`.
    Claim {
        /// The template.
        template: Uuid,
        /// The idempotency key.
        request_id: &'a str,
    },
    /// Redeem a coupon for an order.
    Redeem {
        /// The coupon.
        target: &'a CouponRef,
        /// The order.
        order_id: &'a str,
        /// The order's amount, minor units.
        order_amount: i64,
    },
    /// Refund the redemption of a coupon by an order.
    Refund {
        /// The coupon.
        target: &'a CouponRef,
        /// The order it was redeemed for.
        order_id: &'a str,
    },
    /// Lock a coupon for an order being placed, for `ttl_secs`.
    Lock {
        /// The coupon.
        target: &'a CouponRef,
        /// The order.
        order_id: &'a str,
        /// Seconds the lock holds unless the order is paid or cancelled.
        ttl_secs: u64,
    },
    /// Release the lock an order holds (the order was cancelled).
    Release {
        /// The coupon.
        target: &'a CouponRef,
        /// The cancelled order.
        order_id: &'a str,
    },
}

/// One request, described once: what it does, which business refusals are expected of it,
/// whether it deliberately repeats an acknowledged request, and whether its sender acts on
/// another shopper's coupon.
pub(crate) struct Request<'a> {
    action: Action<'a>,
    expected: &'a [&'a str],
    duplicate: bool,
    cross_user: bool,
}

impl<'a> Request<'a> {
    /// A first attempt. A claim may be refused for stock or the limit; a redeem or refund is
    /// expected to succeed unless [`Self::expecting`] says otherwise.
    fn new(action: Action<'a>) -> Self {
        let expected: &[&str] = match action {
            Action::Claim { .. } => &["stock_empty", "user_limit"],
            Action::Redeem { .. }
            | Action::Refund { .. }
            | Action::Lock { .. }
            | Action::Release { .. } => &[],
        };
        Self {
            action,
            expected,
            duplicate: false,
            cross_user: false,
        }
    }

    /// A claim of a coupon of `template` with idempotency key `request_id`.
    pub(crate) fn claim(template: Uuid, request_id: &'a str) -> Self {
        Self::new(Action::Claim {
            template,
            request_id,
        })
    }

    /// A redeem of `target` for `order_id`, an order of `order_amount` minor units.
    pub(crate) fn redeem(target: &'a CouponRef, order_id: &'a str, order_amount: i64) -> Self {
        Self::new(Action::Redeem {
            target,
            order_id,
            order_amount,
        })
    }

    /// A refund of `target`'s redemption by `order_id`.
    pub(crate) fn refund(target: &'a CouponRef, order_id: &'a str) -> Self {
        Self::new(Action::Refund { target, order_id })
    }

    /// A checkout lock of `target` for `order_id`, lasting `ttl_secs` unless paid or
    /// cancelled.
    pub(crate) fn lock(target: &'a CouponRef, order_id: &'a str, ttl_secs: u64) -> Self {
        Self::new(Action::Lock {
            target,
            order_id,
            ttl_secs,
        })
    }

    /// A release of the lock `order_id` holds on `target`.
    pub(crate) fn release(target: &'a CouponRef, order_id: &'a str) -> Self {
        Self::new(Action::Release { target, order_id })
    }

    /// The business refusals (error codes) that are a normal answer to it.
    pub(crate) fn expecting(mut self, codes: &'a [&'a str]) -> Self {
        self.expected = codes;
        self
    }

    /// A deliberate repeat of an acknowledged request: it must be acknowledged again, with
    /// the same answer, so no refusal is expected.
    pub(crate) fn repeated(mut self) -> Self {
        self.duplicate = true;
        self.expected = &[];
        self
    }

    /// Sent by a shopper who does not own the coupon (it must be refused).
    pub(crate) fn by_intruder(mut self) -> Self {
        self.cross_user = true;
        self
    }

    fn op(&self) -> RequestKind {
        match (&self.action, self.cross_user) {
            (Action::Claim { .. }, _) => RequestKind::Claim,
            (Action::Redeem { .. }, false) => RequestKind::Redeem,
            (Action::Redeem { .. }, true) => RequestKind::RedeemCrossUser,
            (Action::Refund { .. }, false) => RequestKind::Refund,
            (Action::Refund { .. }, true) => RequestKind::RefundCrossUser,
            (Action::Lock { .. }, false) => RequestKind::Lock,
            (Action::Lock { .. }, true) => RequestKind::LockCrossUser,
            (Action::Release { .. }, _) => RequestKind::Release,
        }
    }
}

/// Sends `request` as `from`, retrying with the same ids until it has a definitive answer.
pub(crate) async fn send(
    user: &mut impl Transport,
    ctx: &Ctx,
    from: Sender<'_>,
    request: Request<'_>,
) -> Result<Answer, Box<TransactionError>> {
    let op = request.op();
    let customer = from.customer;
    let mut base = Base {
        op,
        goose_user: from.goose_user,
        customer,
        template: None,
        coupon: None,
        request_id: None,
        order_id: None,
        duplicate: request.duplicate,
    };
    let (method, path, bearer, body) = match request.action {
        Action::Claim {
            template,
            request_id,
        } => {
            base.template = Some(template);
            base.request_id = Some(request_id.into());
            (
                GooseMethod::Post,
                format!("/v1/templates/{template}/claims"),
                None,
                json!({ "request_id": request_id }),
            )
        }
        Action::Redeem {
            target,
            order_id,
            order_amount,
        } => {
            base.template = Some(target.template);
            base.coupon = Some(target.coupon);
            base.order_id = Some(order_id.into());
            // Through the order service when the servers have one: it names the shopper,
            // whose ownership the server still checks (a cross-user redeem stays
            // `not_owner`).
            let body = match ctx.service_token {
                Some(_) => json!({
                    "order_id": order_id, "order_amount": order_amount, "user_id": &*customer.id
                }),
                None => json!({ "order_id": order_id, "order_amount": order_amount }),
            };
            (
                GooseMethod::Post,
                format!("/v1/coupons/{}/redeem", target.coupon),
                ctx.service_token.as_deref(),
                body,
            )
        }
        Action::Refund { target, order_id } => order_call(
            ctx,
            customer,
            &mut base,
            target,
            order_id,
            "refund",
            json!({}),
        ),
        Action::Lock {
            target,
            order_id,
            ttl_secs,
        } => {
            let extra = json!({ "ttl_secs": ttl_secs });
            order_call(ctx, customer, &mut base, target, order_id, "lock", extra)
        }
        Action::Release { target, order_id } => order_call(
            ctx,
            customer,
            &mut base,
            target,
            order_id,
            "release",
            json!({}),
        ),
    };
    let req = Req {
        op,
        method,
        path,
        who: customer,
        bearer,
        body: Some(body),
        expected: request.expected,
    };
    perform(user, ctx, &base, &req).await
}

/// An operation of the order's side (refund, lock, release) on `target` for `order_id`:
/// through the order service when the servers have one, naming the shopper whose order it
/// is (the server still checks that the coupon is theirs); `body` holds its other fields.
fn order_call<'c>(
    ctx: &'c Ctx,
    customer: &Customer,
    base: &mut Base<'_>,
    target: &CouponRef,
    order_id: &str,
    verb: &str,
    mut body: Value,
) -> (GooseMethod, String, Option<&'c str>, Value) {
    base.template = Some(target.template);
    base.coupon = Some(target.coupon);
    base.order_id = Some(order_id.into());
    body["order_id"] = json!(order_id);
    if ctx.service_token.is_some() {
        body["user_id"] = json!(&*customer.id);
    }
    (
        GooseMethod::Post,
        format!("/v1/coupons/{}/{verb}", target.coupon),
        ctx.service_token.as_deref(),
        body,
    )
}

/// Lists `from`'s coupons (a read: sent once).
pub(crate) async fn my_coupons(
    user: &mut impl Transport,
    ctx: &Ctx,
    from: Sender<'_>,
) -> Result<(), Box<TransactionError>> {
    let req = Req {
        op: RequestKind::MyCoupons,
        method: GooseMethod::Get,
        path: "/v1/users/me/coupons".to_owned(),
        who: from.customer,
        bearer: None,
        body: None,
        expected: &[],
    };
    let resp = user.send(ctx, &req).await?;
    let base = Base {
        op: RequestKind::MyCoupons,
        goose_user: from.goose_user,
        customer: from.customer,
        template: None,
        coupon: None,
        request_id: None,
        order_id: None,
        duplicate: false,
    };
    ctx.acks.record(base.event(0, &resp));
    Ok(())
}
