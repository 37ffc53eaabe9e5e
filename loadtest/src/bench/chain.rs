//! What the group commit did over one sync row (docs/ARCHITECTURE.md, "Group commit").
//!
//! A template's batches run one after another on its counter row, so that chain can bound a
//! sync row while the cores are not all busy. Its share of the row spent in batch
//! transactions says which it was: near 100%, claims waited for the chain (the rate is the
//! claims a batch over the time a batch takes); well under, they were held elsewhere (HTTP,
//! Redis, the CPU). The bench's granting template has one chain, and the bench's in-process
//! rows and its HTTP server share one engine, so the difference of the engine's counters
//! over a row is that row's chain.

use coupon_engine::service::BatchHistogram;
use serde::{Deserialize, Serialize};

use super::median::median;

/// The group commit over one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChainLoad {
    /// Batch transactions committed.
    pub batches: u64,
    /// Claims decided per batch, on average.
    pub claims_per_batch: f64,
    /// Time per batch transaction (its WAL flush included), ms.
    pub batch_ms: f64,
    /// Time spent in batch transactions over the row's nominal length, percent (the batch
    /// of the last claims may end just after it, so a saturated chain can read a little
    /// over 100).
    pub in_transaction_pct: f64,
}

impl ChainLoad {
    /// From the engine's counters before and after a row of `seconds`; None when no batch
    /// committed (a row that granted nothing, or an async row).
    pub(crate) fn between(
        before: &BatchHistogram,
        after: &BatchHistogram,
        seconds: f64,
    ) -> Option<Self> {
        let batches = after.count.checked_sub(before.count)?;
        let claims = after.sum.checked_sub(before.sum)?;
        let micros = after.micros.checked_sub(before.micros)?;
        if batches == 0 || seconds <= 0.0 {
            return None;
        }
        Some(Self {
            batches,
            claims_per_batch: claims as f64 / batches as f64,
            batch_ms: micros as f64 / 1000.0 / batches as f64,
            in_transaction_pct: micros as f64 / 1e4 / seconds,
        })
    }

    /// Each field's median over the rounds that measured it.
    pub(crate) fn median_of(loads: &[Self]) -> Option<Self> {
        let of = |f: fn(&Self) -> f64| median(loads.iter().map(f).collect());
        Some(Self {
            batches: of(|l| l.batches as f64)?.round() as u64,
            claims_per_batch: of(|l| l.claims_per_batch)?,
            batch_ms: of(|l| l.batch_ms)?,
            in_transaction_pct: of(|l| l.in_transaction_pct)?,
        })
    }

    /// One line for the console.
    pub(crate) fn describe(&self) -> String {
        format!(
            "group commit over the row: {} batches, {:.1} claims a batch, {:.2} ms a batch \
             transaction, in a transaction {:.0}% of the row",
            self.batches, self.claims_per_batch, self.batch_ms, self.in_transaction_pct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(count: u64, sum: u64, micros: u64) -> BatchHistogram {
        BatchHistogram {
            count,
            sum,
            micros,
            ..BatchHistogram::default()
        }
    }

    #[test]
    fn a_row_is_the_difference_of_the_counters_over_its_length() {
        let load = ChainLoad::between(
            &counters(10, 100, 5_000),
            &counters(110, 2_100, 155_000),
            0.2,
        )
        .expect("100 batches");
        assert_eq!(load.batches, 100);
        assert!((load.claims_per_batch - 20.0).abs() < 1e-9);
        assert!((load.batch_ms - 1.5).abs() < 1e-9);
        assert!((load.in_transaction_pct - 75.0).abs() < 1e-9);
    }

    #[test]
    fn a_row_without_batches_has_no_chain() {
        let same = counters(10, 100, 5_000);
        assert_eq!(ChainLoad::between(&same, &same, 5.0), None);
        // Counters that went backwards (another engine's) are not a row's.
        assert_eq!(
            ChainLoad::between(&counters(10, 100, 5_000), &counters(5, 50, 10), 5.0),
            None
        );
    }

    #[test]
    fn rounds_give_each_fields_median() {
        let l = |batches, per, ms, pct| ChainLoad {
            batches,
            claims_per_batch: per,
            batch_ms: ms,
            in_transaction_pct: pct,
        };
        let m = ChainLoad::median_of(&[
            l(500, 18.0, 1.8, 91.0),
            l(700, 20.0, 1.2, 84.0),
            l(600, 17.0, 1.5, 95.0),
        ])
        .expect("three rounds");
        assert_eq!(m, l(600, 18.0, 1.5, 91.0));
        assert_eq!(ChainLoad::median_of(&[]), None);
    }
}
