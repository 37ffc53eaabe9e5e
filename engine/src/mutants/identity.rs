//! Mutant of the new-server check (service/identity.rs): D10 loads the scripts on a server
//! that answered NOSCRIPT and lets it admit at once, without checking who it is.

use crate::{CouponEngine, EngineResult, Variant};

/// D10: the claim that met a new server's NOSCRIPT loads the scripts and is admitted on
/// whatever counters the server came back with.
pub(crate) async fn check_new_server(e: &CouponEngine) -> Option<EngineResult<()>> {
    if e.config().variant != Variant::D10 {
        return None;
    }
    Some(e.redis().load_scripts().await.map_err(Into::into))
}
