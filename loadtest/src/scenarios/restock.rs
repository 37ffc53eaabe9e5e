//! After a sale sold out: stock given back must sell again, on every server, within a bound
//! (I9, liveness). A server that answers the sold-out flood itself (the sold-out gate) must
//! notice stock returned through another server; a gate that stays closed refuses it for
//! good, and nothing else in a run would show it. The probe redeems and refunds one coupon
//! per server, each back to stock and all through the first server, then has a shopper
//! without a coupon claim on each server until granted or the bound has passed. It runs
//! after the audit: its refunds change the final state, and must not hide an oversell of
//! the sale's (a refund of an oversold coupon brings the count back to the stock). Its
//! answers are written to `acks.jsonl` after the sale's.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use uuid::Uuid;

use super::{
    Ctx,
    lean::{LeanUser, Pinned},
    ops::{self, CouponRef, Request, Sender},
};
use crate::{
    api::Api,
    checks::InvariantResult,
    progress::phase,
    setup::Customer,
    templates::{Role, TemplateInfo},
};
use coupon_engine::{CouponStatus, Invariant, RefundPolicy};
use coupon_verify::liveness::{Resale, check_resales};

/// What the probe saw on one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServerRestock {
    /// Index of the server.
    pub server: usize,
    /// Seconds from the last refund to this server's first grant; None: none within the bound.
    pub granted_after_secs: Option<f64>,
    /// Claims sent on it.
    pub claims: u32,
}

/// Order amount of the probe's redemptions (above any minimum a flash-sale template has).
const ORDER_AMOUNT: i64 = 1_000_000;

/// Pause between one shopper's claims while a server still refuses: the bound is some
/// hundreds of milliseconds, so this keeps the probe from becoming a flood of its own.
const CLAIM_PACE: Duration = Duration::from_millis(10);

/// The probe, when the hot template sold out and gives refunds back to stock. `within`
/// is the bound every server must meet; `Ok(None)`: the run has no such sale (said why).
pub(crate) async fn probe(
    ctx: &Ctx,
    api: &Api,
    within: Duration,
) -> anyhow::Result<Option<(Vec<ServerRestock>, InvariantResult)>> {
    let Some(hot) = sold_out_sale(ctx, api).await? else {
        return Ok(None);
    };
    let Some(endpoints) = ctx.lean.as_deref() else {
        phase(
            "restock",
            "skipped: a server is not http://<ip>:<port> (the probe pins each server)",
        );
        return Ok(None);
    };
    let servers = ctx.servers.bases().len().max(1);
    let (holders, claimers) = shoppers(ctx, api, hot, servers).await?;
    if holders.len() < servers || claimers.len() < servers {
        phase(
            "restock",
            format!(
                "skipped: {} coupon holders and {} shoppers without one, {servers} of each needed",
                holders.len(),
                claimers.len()
            ),
        );
        return Ok(None);
    }
    phase(
        "restock",
        format!(
            "giving {servers} coupon(s) back to stock through server 0, then claiming on each \
             of {servers} server(s) for up to {within:?}"
        ),
    );
    let mut first = Pinned {
        lean: LeanUser::new(endpoints),
        server: 0,
    };
    for (i, (customer, coupon)) in holders.iter().enumerate() {
        let from = Sender {
            goose_user: ctx.users,
            customer,
        };
        let order = format!("{}-restock-{i}", ctx.tag);
        let target = CouponRef {
            coupon: *coupon,
            template: hot.id,
        };
        let redeemed = ops::send(
            &mut first,
            ctx,
            from,
            Request::redeem(&target, &order, ORDER_AMOUNT),
        )
        .await
        .map_err(|e| anyhow::anyhow!("redeeming coupon {coupon}: {e:?}"))?;
        let refunded = match redeemed.is_ok() {
            true => ops::send(&mut first, ctx, from, Request::refund(&target, &order))
                .await
                .map_err(|e| anyhow::anyhow!("refunding coupon {coupon}: {e:?}"))?
                .is_ok(),
            false => false,
        };
        if !refunded {
            phase(
                "restock",
                format!("skipped: coupon {coupon} could not be redeemed and refunded"),
            );
            return Ok(None);
        }
    }
    let given_back = Instant::now();
    let seen = claim_on_each(ctx, endpoints, &claimers, hot.id, given_back, within).await;
    let result = verdict(&seen, within);
    Ok(Some((seen, result)))
}

/// The hot template, when it gives refunds back to stock and every coupon of it is counted.
async fn sold_out_sale<'c>(ctx: &'c Ctx, api: &Api) -> anyhow::Result<Option<&'c TemplateInfo>> {
    let Some(hot) = ctx.templates.iter().find(|t| t.role == Role::Hot) else {
        return Ok(None);
    };
    // A sale with a claim window may be closed by now, and a refusal then is right.
    if hot.refund_policy != RefundPolicy::ReturnToStock || hot.claim_window_unix_us.is_some() {
        return Ok(None);
    }
    let audit = api.audit(hot.id).await?;
    if audit.counted < audit.total_stock {
        phase(
            "restock",
            format!(
                "skipped: the sale did not sell out ({} of {} counted)",
                audit.counted, audit.total_stock
            ),
        );
        return Ok(None);
    }
    Ok(Some(hot))
}

/// `n` shoppers holding an unused coupon of `hot`, and `n` who may still claim one.
async fn shoppers(
    ctx: &Ctx,
    api: &Api,
    hot: &TemplateInfo,
    n: usize,
) -> anyhow::Result<(Vec<(Customer, Uuid)>, Vec<Customer>)> {
    let mut holders = Vec::new();
    let mut claimers = Vec::new();
    for customer in &ctx.customers {
        if holders.len() >= n && claimers.len() >= n {
            break;
        }
        let mine: Vec<_> = api
            .wallet(&customer.token)
            .await?
            .into_iter()
            .filter(|c| c.template_id.as_uuid() == hot.id)
            .collect();
        if mine.len() < hot.per_user_limit as usize {
            if claimers.len() < n {
                claimers.push(customer.clone());
            }
        } else if holders.len() < n
            && let Some(c) = mine.iter().find(|c| c.status == CouponStatus::Issued)
        {
            holders.push((customer.clone(), c.id));
        }
    }
    Ok((holders, claimers))
}

/// Claims on each server, as its own shopper, in rounds until every server granted one or
/// `within` has passed since `since`. Rounds rather than a task per server: each server's
/// time to grant is what counts, and a round is a few milliseconds.
async fn claim_on_each(
    ctx: &Ctx,
    endpoints: &[crate::lean_client::Endpoint],
    claimers: &[Customer],
    hot: Uuid,
    since: Instant,
    within: Duration,
) -> Vec<ServerRestock> {
    let mut seen: Vec<ServerRestock> = (0..claimers.len())
        .map(|server| ServerRestock {
            server,
            granted_after_secs: None,
            claims: 0,
        })
        .collect();
    let mut pinned: Vec<Pinned> = (0..claimers.len())
        .map(|server| Pinned {
            lean: LeanUser::new(endpoints),
            server,
        })
        .collect();
    loop {
        for ((p, s), customer) in pinned.iter_mut().zip(&mut seen).zip(claimers) {
            if s.granted_after_secs.is_some() {
                continue;
            }
            let request_id = format!("{}-restock-{}-{}", ctx.tag, s.server, s.claims);
            s.claims += 1;
            let from = Sender {
                goose_user: ctx.users,
                customer,
            };
            let granted = ops::send(p, ctx, from, Request::claim(hot, &request_id))
                .await
                .is_ok_and(|a| a.is_ok());
            if granted {
                s.granted_after_secs = Some(since.elapsed().as_secs_f64());
            }
        }
        if seen.iter().all(|s| s.granted_after_secs.is_some()) || since.elapsed() >= within {
            return seen;
        }
        tokio::time::sleep(CLAIM_PACE).await;
    }
}

/// I9 as the probe judges it, by the verification core's checker.
fn verdict(seen: &[ServerRestock], within: Duration) -> InvariantResult {
    let resales: Vec<Resale> = seen
        .iter()
        .map(|s| Resale {
            server: s.server,
            claims: u64::from(s.claims),
            granted_after: s.granted_after_secs.map(Duration::from_secs_f64),
        })
        .collect();
    let details: Vec<String> = check_resales(&resales, within)
        .into_iter()
        .map(|f| f.detail)
        .collect();
    let slowest = seen
        .iter()
        .filter_map(|s| s.granted_after_secs)
        .fold(0.0f64, f64::max);
    InvariantResult {
        id: Invariant::I9.id().to_owned(),
        title: Invariant::I9.title().to_owned(),
        passed: details.is_empty(),
        sources: "restock probe".to_owned(),
        checked: vec![format!(
            "stock given back after the sale sold out sold again on {} of {} server(s) within \
             {within:?} (slowest {slowest:.3} s)",
            seen.len() - details.len(),
            seen.len()
        )],
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_never_sells_the_stock_again_fails_i9() {
        let within = Duration::from_secs(1);
        let seen = [
            ServerRestock {
                server: 0,
                granted_after_secs: Some(0.01),
                claims: 1,
            },
            ServerRestock {
                server: 1,
                granted_after_secs: None,
                claims: 80,
            },
        ];
        let r = verdict(&seen, within);
        assert!(!r.passed);
        assert_eq!(r.id, "I9");
        assert!(r.details[0].contains("server 1"), "{:?}", r.details);
        assert!(verdict(&seen[..1], within).passed);
    }
}
