//! The expiry sweep: lapsed checkout locks are released first (their coupons are issued
//! again), then `issued` coupons past validity become `expired`, in batches.

use super::CouponEngine;
use crate::error::EngineResult;

/// Coupons expired per UPDATE.
const EXPIRE_BATCH: i64 = 1000;

impl CouponEngine {
    /// Expires every issued coupon past its validity; returns how many.
    pub async fn expire_sweep(&self) -> EngineResult<u64> {
        self.release_lapsed_locks().await?;
        let mut total = 0;
        loop {
            let n = crate::store::postgres::expire_batch(&self.inner.pg, EXPIRE_BATCH).await?;
            total += n;
            if n < EXPIRE_BATCH as u64 {
                if total > 0 {
                    tracing::info!(expired = total, "expiry sweep");
                }
                return Ok(total);
            }
        }
    }
}
