//! Engine variants: the correct engine, and (with the `mutants` feature) deliberately broken
//! ones reproducing the classic coupon bugs (docs/ARCHITECTURE.md, "Mutants"), so the
//! harness can be shown to catch each of them. A release server build has only
//! [`Variant::Correct`].

use serde::{Deserialize, Serialize};

/// Which engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The real engine.
    #[default]
    Correct,
    /// D1: "check-then-decrement outside one atomic step (GET then DECR) → oversell."
    #[cfg(feature = "mutants")]
    D1,
    /// D2: "lock released with a plain DEL (no token) … with the conditional UPDATE removed,
    /// two redeems of one coupon both succeed." (The use-log insert swallows conflicts.)
    #[cfg(feature = "mutants")]
    D2,
    /// D3: "the redeem's UPDATE and use-log INSERT not in one transaction; early return leaks
    /// the lock."
    #[cfg(feature = "mutants")]
    D3,
    /// D4: "refund returns the coupon to the user AND returns stock → more live coupons than
    /// stock."
    #[cfg(feature = "mutants")]
    D4,
    /// D5: "claim with no persistence recovery: a DB failure after the Redis deduct loses the
    /// claim (stock leak)."
    #[cfg(feature = "mutants")]
    D5,
    /// D5b: D5's naive-retry sibling: "with a naive retry, issues twice."
    #[cfg(feature = "mutants")]
    D5b,
    /// D6: "the mutant that treats a missing key as 'rebuild from total_stock' ignores issued
    /// coupons → oversell after a Redis restart."
    #[cfg(feature = "mutants")]
    D6,
    /// D6b: "a rebuild that counts rows without fencing late writers."
    #[cfg(feature = "mutants")]
    D6b,
    /// D7: "no idempotency key: a client retry after a timeout claims twice."
    #[cfg(feature = "mutants")]
    D7,
    /// D8: the claim batch inserts whatever Redis admitted, with no stock or limit check in
    /// Postgres (the round-1 behaviour): a stale Redis oversells.
    #[cfg(feature = "mutants")]
    D8,
    /// D9: a claim batch commits without waiting for its WAL flush and is answered at once,
    /// so a Postgres crash loses acknowledged claims.
    #[cfg(feature = "mutants")]
    D9,
    /// D10: a Redis new to the engine (restarted, or a promoted replica) admits before its
    /// identity is checked: the claim that meets its NOSCRIPT loads the scripts and goes on,
    /// on counters that may be stale until the periodic check notices.
    #[cfg(feature = "mutants")]
    D10,
    /// D11: the claim window judged only by the admitting server's own clock (the round-2
    /// engine): a server whose clock runs fast sells before the sale opens, a slow one after
    /// it closes. Killed by a run with one server's clock off (`--nemesis clock-skew`).
    #[cfg(feature = "mutants")]
    D11,
    /// D12: no deadlines (the round-2 engine): a claim, redeem or refund waits as long as
    /// its store does, and a claim batch stuck on a dead link holds its template. Killed by
    /// the liveness check (I9) under a Postgres blackholed or paused.
    #[cfg(feature = "mutants")]
    D12,
    /// D13: the async persister takes the acknowledged intents off Redis's pending set as it
    /// takes them in hand and keeps them only in memory until written (retrying there, so no
    /// store fault loses them): a server killed mid-batch loses acknowledged claims. Killed
    /// by the property tests' engine kill (a second engine killed mid-batch).
    #[cfg(feature = "mutants")]
    D13,
    /// D14: no Postgres identity check: Redis state is trusted across a Postgres failover
    /// (or restore) as if Postgres had not changed. After a failover to a standby that
    /// lacked the last commits, Redis keeps counting the lost coupons: their stock never
    /// sells again (I2). Killed by the load test's `--nemesis pg-failover`.
    #[cfg(feature = "mutants")]
    D14,
    /// D15: every identity check rebuilds every live template, changed or not (a rebuild
    /// storm: each one bumps the epoch and fences the claims in flight). Killed by the
    /// count of rebuilds per store change (I14).
    #[cfg(feature = "mutants")]
    D15,
    /// D16: the sold-out gate refuses every claim while it is closed, retries of granted
    /// claims too (it never read which request ids were granted): a shopper whose answer
    /// was lost retries and is told the sale is sold out, though it holds a coupon. Killed
    /// by the property tests (a retry of a granted claim must get its coupon).
    #[cfg(feature = "mutants")]
    D16,
    /// D17: the sold-out gate never opens again: stock that comes back (a refund to stock,
    /// a rebuild) is refused in process on this server for ever. Killed by the property
    /// tests (a claim refused while the model holds stock).
    #[cfg(feature = "mutants")]
    D17,
    /// D18: the claim script names a key of its own per request (round two's layout, its
    /// recorded outcome), missing until the claim runs: while the template's cluster slot
    /// migrates, Redis answers every fresh claim TRYAGAIN, and the sale stops for the whole
    /// migration. Killed by the property tests' slot migration (a claim left unanswered
    /// while no store was down, I9).
    #[cfg(feature = "mutants")]
    D18,
    /// Seen in the wild, macrozheng/mall #1003 ("5 concurrent orders reused one coupon"):
    /// the order checks that the coupon is free, then locks it with an UPDATE that no
    /// longer checks, so orders placed side by side all hold it. Killed by I8, and by I11
    /// when neither order let the coupon go.
    #[cfg(feature = "mutants")]
    Mall1003,
    /// Seen in the wild, linlinjava/litemall #581 ("total 1, limit 1: 64 concurrent claims
    /// got 9 coupons"): the claim counts the issued rows in the database, then inserts, with
    /// nothing atomic between the count and the insert. Killed by I1 / I3.
    #[cfg(feature = "mutants")]
    Litemall581,
    /// Seen in the wild, macrozheng/mall #1002 ("the deduction is not capped: a negative
    /// amount to pay is stored"): the discount is not limited to the order amount. Killed by
    /// I13.
    #[cfg(feature = "mutants")]
    Mall1002,
    /// Seen in the wild, oneCoupon's settlement: the LOCKING update's row count is never
    /// checked, so a lock that matched no row (the coupon held by another order, used,
    /// revoked) answers success. Killed by I8 / I6.
    #[cfg(feature = "mutants")]
    OneCouponLockUnchecked,
    /// Seen in the wild, oneCoupon's settlement: a cancelled order never releases its
    /// coupon (the cancel answers success and leaves it locked), so the shopper cannot use
    /// it again until the lock lapses. Killed by I8.
    #[cfg(feature = "mutants")]
    OneCouponNoRelease,
}

impl Variant {
    /// Every variant compiled in, correct first.
    pub fn all() -> Vec<Self> {
        vec![
            Self::Correct,
            #[cfg(feature = "mutants")]
            Self::D1,
            #[cfg(feature = "mutants")]
            Self::D2,
            #[cfg(feature = "mutants")]
            Self::D3,
            #[cfg(feature = "mutants")]
            Self::D4,
            #[cfg(feature = "mutants")]
            Self::D5,
            #[cfg(feature = "mutants")]
            Self::D5b,
            #[cfg(feature = "mutants")]
            Self::D6,
            #[cfg(feature = "mutants")]
            Self::D6b,
            #[cfg(feature = "mutants")]
            Self::D7,
            #[cfg(feature = "mutants")]
            Self::D8,
            #[cfg(feature = "mutants")]
            Self::D9,
            #[cfg(feature = "mutants")]
            Self::D10,
            #[cfg(feature = "mutants")]
            Self::D11,
            #[cfg(feature = "mutants")]
            Self::D12,
            #[cfg(feature = "mutants")]
            Self::D13,
            #[cfg(feature = "mutants")]
            Self::D14,
            #[cfg(feature = "mutants")]
            Self::D15,
            #[cfg(feature = "mutants")]
            Self::D16,
            #[cfg(feature = "mutants")]
            Self::D17,
            #[cfg(feature = "mutants")]
            Self::D18,
            #[cfg(feature = "mutants")]
            Self::Mall1003,
            #[cfg(feature = "mutants")]
            Self::Litemall581,
            #[cfg(feature = "mutants")]
            Self::Mall1002,
            #[cfg(feature = "mutants")]
            Self::OneCouponLockUnchecked,
            #[cfg(feature = "mutants")]
            Self::OneCouponNoRelease,
        ]
    }

    /// Whether Postgres checks what Redis admitted. Besides D8 itself, the Redis-side
    /// defects (D1, D6, D6b) keep the round-1 trust in Redis they were written against:
    /// under arbitration they could no longer oversell, and the harness must still show it
    /// catches them where nothing backs Redis up.
    pub fn arbitration(self) -> crate::store::arbiter::Arbitration {
        use crate::store::arbiter::Arbitration;
        match self {
            #[cfg(feature = "mutants")]
            Self::D1 | Self::D6 | Self::D6b | Self::D8 | Self::Litemall581 => {
                Arbitration::TrustRedis
            }
            _ => Arbitration::Enforced,
        }
    }

    /// Whether the sync batch has Postgres's clock judge the claim window (only D11 leaves
    /// it to the admitting server's clock).
    pub fn window_by_postgres(self) -> bool {
        match self {
            #[cfg(feature = "mutants")]
            Self::D11 => false,
            _ => true,
        }
    }

    /// Whether the property tests can kill it: D11 needs one server's clock off, which
    /// libfaketime does per process, and the property tests run engines in-process; the load
    /// test's `--servers N --nemesis clock-skew` kills it (CI requires that run to fail).
    /// D14 needs a Postgres failover (a primary and a streaming standby of the run's own);
    /// the load test's `--nemesis pg-failover` kills it.
    pub fn needs_process_faults(self) -> bool {
        match self {
            #[cfg(feature = "mutants")]
            Self::D11 | Self::D14 => true,
            _ => false,
        }
    }

    /// Whether operations and claim batches are bounded by the engine's deadline (all but
    /// D12).
    pub fn has_deadlines(self) -> bool {
        match self {
            #[cfg(feature = "mutants")]
            Self::D12 => false,
            _ => true,
        }
    }

    /// Whether the async persister leaves acknowledged intents pending in Redis until their
    /// rows are stored (all but D13, which holds them in memory: lost with the process).
    pub fn leaves_intents_pending_until_stored(self) -> bool {
        match self {
            #[cfg(feature = "mutants")]
            Self::D13 => false,
            _ => true,
        }
    }

    /// The claim persistence the variant's defect lives in, if only one: D13's is in the
    /// async persister.
    pub fn defect_persistence(self) -> Option<crate::persistence::Persistence> {
        match self {
            #[cfg(feature = "mutants")]
            Self::D13 => Some(crate::persistence::Persistence::Async),
            _ => None,
        }
    }

    /// Whether a claim is answered only once its batch's commit is on disk.
    pub fn waits_for_durability(self) -> bool {
        match self {
            #[cfg(feature = "mutants")]
            Self::D9 => false,
            _ => true,
        }
    }

    /// The name used on command lines (`correct`, `d1`, …).
    pub fn name(self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(s)) => s,
            _ => format!("{self:?}").to_lowercase(),
        }
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.to_ascii_lowercase();
        Self::all()
            .into_iter()
            .find(|v| v.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<String> = Self::all().into_iter().map(Self::name).collect();
                format!(
                    "unknown variant {s:?}; this build has: {} (mutants need the `mutants` feature)",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in Variant::all() {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        assert!("nope".parse::<Variant>().is_err());
    }
}
