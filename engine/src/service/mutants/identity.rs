//! Mutants of the identity checks (service/identity.rs): D10 loads the scripts on a server
//! that answered NOSCRIPT and lets it admit at once, without checking who it is; D14 does
//! not see a change of Postgres; D15 sees a change on every check and forgets what a
//! retried check already rebuilt.

use crate::{CouponEngine, EngineResult, Variant, store::postgres::StoreIdentities};

/// D10: the claim that met a new server's NOSCRIPT loads the scripts and is admitted on
/// whatever counters the server came back with.
pub(crate) async fn check_new_server(e: &CouponEngine) -> Option<EngineResult<()>> {
    if e.config().variant != Variant::D10 {
        return None;
    }
    Some(e.redis().load_scripts().await.map_err(Into::into))
}

/// D14 and D15: which store changed, as the mutant sees it (`change` is the engine's answer).
pub(crate) fn identity_change(
    e: &CouponEngine,
    recorded: Option<&StoreIdentities>,
    current: &StoreIdentities,
    change: Option<&'static str>,
) -> Option<&'static str> {
    match e.config().variant {
        Variant::D14 => recorded.and_then(|r| (r.redis != current.redis).then_some("redis")),
        Variant::D15 => recorded.map(|_| "every check"),
        _ => change,
    }
}

/// D15: a retried check does not see what it already rebuilt for the same stores.
pub(crate) fn forgets_rebuilds(e: &CouponEngine) -> bool {
    e.config().variant == Variant::D15
}
