//! Redis key layout (docs/ARCHITECTURE.md, "Data model"). All keys of one template share the
//! hash tag `{T}`, so one script touches one cluster slot; every key starts with the engine's
//! namespace.

use uuid::Uuid;

use crate::domain::ids::TemplateId;

/// The keys of one template.
#[derive(Debug, Clone)]
pub struct TemplateKeys {
    prefix: String,
    /// Remaining stock; absent means not initialised, never zero.
    pub stock: String,
    /// Hash user_id -> coupons held against the per-user limit.
    pub claimed: String,
    /// Hash claim_request_id -> claim intent not yet persisted.
    pub pending: String,
    /// Fencing epoch of the current Redis state (docs/ARCHITECTURE.md, "Rebuild and fencing").
    pub epoch: String,
    /// Set of stock_outbox ids already applied (exactly-once relay).
    pub applied: String,
    /// The epoch of the rebuild under way, until it is published.
    pub rebuilding: String,
    /// The recorded claim outcomes (hash request id -> outcome), one key so that every key a
    /// claim names exists before it runs: a per-request key would be missing for every fresh
    /// claim, and while the template's slot migrates Redis answers a script naming a missing
    /// key TRYAGAIN, for the whole migration (`lua/outcomes.lua`).
    pub outcomes: String,
}

impl TemplateKeys {
    /// `script` over the template's counters, in the order the scripts that give stock
    /// back or publish a rebuild take them (stock, claimed, pending, epoch); the keys a
    /// script takes after them follow.
    pub fn counters_of<'s>(&self, script: &'s redis::Script) -> redis::ScriptInvocation<'s> {
        let mut invocation = script.key(&self.stock);
        invocation
            .key(&self.claimed)
            .key(&self.pending)
            .key(&self.epoch);
        invocation
    }

    /// Keys of `template` under `namespace`.
    pub fn new(namespace: &str, template: TemplateId) -> Self {
        let prefix = format!("{namespace}:coupon:{{{template}}}:");
        Self {
            stock: format!("{prefix}stock"),
            claimed: format!("{prefix}claimed"),
            pending: format!("{prefix}pending"),
            epoch: format!("{prefix}epoch"),
            applied: format!("{prefix}applied"),
            rebuilding: format!("{prefix}rebuilding"),
            outcomes: format!("{prefix}outcomes"),
            prefix,
        }
    }

    /// A key of one claim request's own (round two's layout of the recorded outcome), which
    /// D18 names in its claim: missing until the claim runs.
    #[cfg(feature = "mutants")]
    pub fn request_key(&self, request_id: &str) -> String {
        format!("{}req:{request_id}", self.prefix)
    }

    /// The `claimed` hash a rebuild of `epoch` builds in slices before it is published.
    pub fn staging(&self, epoch: i64) -> String {
        format!("{}claimed:staging:{epoch}", self.prefix)
    }

    /// A SCAN pattern matching every key of this template.
    pub fn pattern(&self) -> String {
        format!("{}*", self.prefix.replace('{', "\\{").replace('}', "\\}"))
    }
}

/// The redeem lock of one coupon.
pub fn coupon_lock(namespace: &str, coupon: Uuid) -> String {
    format!("{namespace}:lock:coupon:{{{coupon}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag() {
        let t = Uuid::nil();
        let k = TemplateKeys::new("ns", t.into());
        assert_eq!(k.stock, format!("ns:coupon:{{{t}}}:stock"));
        assert_eq!(k.outcomes, format!("ns:coupon:{{{t}}}:outcomes"));
        assert_eq!(coupon_lock("ns", t), format!("ns:lock:coupon:{{{t}}}"));
    }
}
