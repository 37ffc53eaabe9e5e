//! The templates each scenario seeds, and what the runner remembers of them.

use coupon_engine::{Discount, DiscountKind, NewTemplate, RefundPolicy};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cli::{ScenarioKind, Settings};

/// What a template is for in its scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// The flash-sale template: small stock, raced for.
    Hot,
    /// Lifecycle template whose refunds give the coupon back to the user.
    ReturnToUser,
    /// Lifecycle template whose refunds give the stock back.
    ReturnToStock,
    /// Mixed: a percent discount with a cap, refunds to the user.
    Everyday,
    /// Mixed: a threshold discount (minimum order), refunds to stock.
    Threshold,
}

/// A seeded template.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TemplateInfo {
    /// Its id on the server.
    pub id: Uuid,
    /// Its role in the scenario.
    pub role: Role,
    /// Display name.
    pub name: String,
    /// Total stock.
    pub total_stock: i64,
    /// Per-user limit.
    pub per_user_limit: i32,
    /// Refund policy.
    pub refund_policy: RefundPolicy,
    /// Discount kind.
    pub discount: DiscountKind,
    /// Minimum order amount, if any (minor units).
    pub min_order_amount: Option<i64>,
    /// The claim window, Unix microseconds `[opens, closes)`, when the template has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_window_unix_us: Option<(i64, i64)>,
}

/// `--nemesis clock-skew`'s sale: a claim window that opens a few seconds into the run and
/// closes before its end, and stock and a limit too large to run out, so shoppers are still
/// claiming at both edges, where a server whose clock is off would sell outside the window.
fn skewed_sale(s: &Settings, name: &str) -> NewTemplate {
    let now = time::OffsetDateTime::now_utc();
    let length = (s.load.duration.unwrap_or(10) / 3).max(2);
    let opens = now + time::Duration::seconds(4);
    NewTemplate {
        claim_starts_at: Some(opens),
        claim_ends_at: Some(opens + time::Duration::seconds(length as i64)),
        ..NewTemplate::simple(name, 10_000_000, 10_000, RefundPolicy::ReturnToStock)
    }
}

/// The specs a scenario seeds, with their roles.
pub(crate) fn plan(s: &Settings, run_tag: &str) -> Vec<(Role, NewTemplate)> {
    let named = |what: &str| format!("loadtest {run_tag} {what}");
    match s.scenario {
        ScenarioKind::FlashSale
            if s.serving.nemesis == Some(crate::nemesis::NemesisKind::ClockSkew) =>
        {
            vec![(Role::Hot, skewed_sale(s, &named("flash sale in a window")))]
        }
        ScenarioKind::FlashSale if s.sale.templates > 1 => (0..s.sale.templates)
            .map(|i| {
                let spec = NewTemplate::simple(
                    &named(&format!("flash sale {i}")),
                    s.sale.stock,
                    s.sale.per_user_limit,
                    RefundPolicy::ReturnToStock,
                );
                (Role::Hot, spec)
            })
            .collect(),
        ScenarioKind::FlashSale => vec![(
            Role::Hot,
            NewTemplate::simple(
                &named("flash sale"),
                s.sale.stock,
                s.sale.per_user_limit,
                RefundPolicy::ReturnToStock,
            ),
        )],
        ScenarioKind::Lifecycle | ScenarioKind::Checkout => vec![
            (
                Role::ReturnToUser,
                NewTemplate {
                    extend_validity_on_refund: true,
                    ..NewTemplate::simple(
                        &named("lifecycle return_to_user"),
                        s.sale.stock,
                        s.sale.per_user_limit,
                        RefundPolicy::ReturnToUser,
                    )
                },
            ),
            (
                Role::ReturnToStock,
                NewTemplate::simple(
                    &named("lifecycle return_to_stock"),
                    s.sale.stock,
                    s.sale.per_user_limit,
                    RefundPolicy::ReturnToStock,
                ),
            ),
        ],
        ScenarioKind::Mixed => vec![
            (
                Role::Hot,
                NewTemplate::simple(
                    &named("mixed hot"),
                    s.sale.stock,
                    s.sale.per_user_limit,
                    RefundPolicy::ReturnToStock,
                ),
            ),
            (
                Role::Everyday,
                NewTemplate {
                    discount: Discount {
                        kind: DiscountKind::Percent,
                        amount: None,
                        percent: Some(10),
                        min_order_amount: None,
                        max_discount: Some(2_000),
                    },
                    ..NewTemplate::simple(
                        &named("mixed everyday"),
                        1_000_000,
                        5,
                        RefundPolicy::ReturnToUser,
                    )
                },
            ),
            (
                Role::Threshold,
                NewTemplate {
                    discount: Discount {
                        kind: DiscountKind::Threshold,
                        amount: Some(1_000),
                        percent: None,
                        min_order_amount: Some(5_000),
                        max_discount: None,
                    },
                    ..NewTemplate::simple(
                        &named("mixed threshold"),
                        1_000_000,
                        3,
                        RefundPolicy::ReturnToStock,
                    )
                },
            ),
        ],
    }
}

impl TemplateInfo {
    /// What the runner keeps of an existing template, driven in `role`.
    pub(crate) fn fetched(t: &crate::api::Fetched, role: Role) -> Self {
        Self {
            id: t.id,
            role,
            name: t.name.clone(),
            total_stock: t.total_stock,
            per_user_limit: t.per_user_limit,
            refund_policy: t.refund_policy,
            discount: t.discount.kind,
            min_order_amount: t.discount.min_order_amount,
            claim_window_unix_us: None,
        }
    }

    /// What the runner keeps of a created template.
    pub(crate) fn new(id: Uuid, role: Role, spec: &NewTemplate) -> Self {
        Self {
            id,
            role,
            name: spec.name.clone(),
            total_stock: spec.total_stock,
            per_user_limit: spec.per_user_limit,
            refund_policy: spec.refund_policy,
            discount: spec.discount.kind,
            min_order_amount: spec.discount.min_order_amount,
            claim_window_unix_us: spec.claim_starts_at.zip(spec.claim_ends_at).map(|(a, b)| {
                (
                    (a.unix_timestamp_nanos() / 1000) as i64,
                    (b.unix_timestamp_nanos() / 1000) as i64,
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_sales_at_once_are_that_many_hot_templates() -> anyhow::Result<()> {
        let s = crate::cli::parse_run(["x", "flash-sale", "--templates", "3", "--stock", "7"])?;
        let plan = plan(&s, "abc");
        assert_eq!(plan.len(), 3);
        assert!(
            plan.iter()
                .all(|(role, spec)| *role == Role::Hot && spec.total_stock == 7)
        );
        Ok(())
    }

    #[test]
    fn every_plan_validates() -> anyhow::Result<()> {
        for scenario in ["flash-sale", "lifecycle", "mixed", "checkout"] {
            let s = crate::cli::parse_run(["x", scenario])?;
            for (_, spec) in plan(&s, "abc") {
                spec.validate()
                    .map_err(|e| anyhow::anyhow!("{scenario}: {e}"))?;
            }
        }
        Ok(())
    }
}
