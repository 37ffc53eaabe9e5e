//! Mutants of the sold-out gate (service/sold_out.rs): D16 refuses every claim while the gate
//! is closed, retries of granted claims too; D17 never rechecks the gate nor opens it when
//! stock comes back, so a sale that got a coupon's place back stays sold out on this server.

use crate::{
    CouponEngine, Variant,
    domain::ids::{RequestId, TemplateId},
    service::GateSays,
};

/// D16 and D17: what the gate says, as the mutant sees it (`says` is the engine's answer).
pub(crate) fn sold_out_says(
    e: &CouponEngine,
    template: TemplateId,
    request: &RequestId,
    says: GateSays,
) -> GateSays {
    let gates = e.sold_out_gates();
    let refuse = match e.config().variant {
        Variant::D16 => says != GateSays::Recheck && gates.holds(template, None),
        Variant::D17 => gates.holds(template, Some(request)),
        _ => return says,
    };
    if refuse { GateSays::Refuse } else { says }
}

/// D17: stock given back by this server leaves its gate closed.
pub(crate) fn keeps_gate_closed(e: &CouponEngine) -> bool {
    e.config().variant == Variant::D17
}
