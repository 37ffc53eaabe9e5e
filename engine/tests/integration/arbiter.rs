//! Postgres's verdicts on batches of intents (`coupon_decide_claims`, one set-based
//! statement) against the rule they implement, written as the obvious sequential loop: each
//! intent in arrival order, the stock checked before the user's limit, a request id answered
//! from what is stored or accepted earlier. Random batches on small stocks and limits, with
//! repeated users and request ids, retries with the same or another coupon id, and intents
//! of older and newer epochs: the cases where a window count could drift from the loop.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use coupon_engine::{
    NewTemplate, RefundPolicy,
    domain::ids::{RequestId, UserId},
    store::{
        arbiter::{self, Arbitration, Verdict},
        redis::PendingIntent,
    },
};
use coupon_testkit::TestEnv;
use uuid::Uuid;

/// A small deterministic generator: the seed is printed, so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The sequential rule, over one template's state.
#[derive(Default)]
struct Reference {
    counted: i64,
    /// request id → (coupon id, owner)
    known: HashMap<String, (Uuid, String)>,
    held: HashMap<String, i64>,
}

impl Reference {
    fn decide(
        &mut self,
        intents: &[PendingIntent],
        epoch: i64,
        stock: i64,
        limit: i64,
        enforce: bool,
    ) -> Vec<Verdict> {
        intents
            .iter()
            .map(|i| {
                if i.epoch < epoch {
                    return Verdict::Fenced;
                }
                if i.epoch > epoch {
                    return Verdict::EpochAhead;
                }
                if let Some((coupon_id, owner)) = self.known.get(i.request_id.as_str()) {
                    return if *coupon_id == i.coupon_id {
                        Verdict::Stored
                    } else {
                        Verdict::Duplicate {
                            coupon_id: *coupon_id,
                            user_id: owner.clone(),
                        }
                    };
                }
                let has = self.held.get(i.user_id.as_str()).copied().unwrap_or(0);
                if enforce && self.counted >= stock {
                    return Verdict::StockEmpty;
                }
                if enforce && has >= limit {
                    return Verdict::UserLimit;
                }
                self.counted += 1;
                *self.held.entry(i.user_id.to_string()).or_default() += 1;
                self.known.insert(
                    i.request_id.to_string(),
                    (i.coupon_id, i.user_id.to_string()),
                );
                Verdict::Stored
            })
            .collect()
    }
}

async fn batches_match_the_sequential_rule(arbitration: Arbitration) -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64
        | 1;
    println!("arbiter batches: seed {seed}");
    let mut rng = Rng(seed);
    let enforce = arbitration == Arbitration::Enforced;
    for _ in 0..25 {
        let stock = 1 + rng.below(12) as i64;
        let limit = 1 + rng.below(3) as i32;
        let template = env
            .engine
            .create_template(NewTemplate::simple(
                "batches",
                stock,
                limit,
                RefundPolicy::ReturnToStock,
            ))
            .await?;
        let epoch: i64 =
            sqlx::query_scalar("SELECT epoch FROM template_stock WHERE template_id = $1")
                .bind(template.id)
                .fetch_one(&pg)
                .await?;
        let mut reference = Reference::default();
        // A request id's coupon id: mostly one per request id (a retry carries it), now
        // and then another (a request id reused after its record expired).
        let coupon = |rid: u64, other: bool| {
            let offset = u128::from(rid) * 2 + u128::from(other);
            Uuid::from_u128(template.id.as_uuid().as_u128().wrapping_add(offset))
        };
        for _ in 0..5 {
            let n = 1 + rng.below(12) as usize;
            let intents: Vec<PendingIntent> = (0..n)
                .map(|_| {
                    let rid = rng.below(10);
                    let epoch_shift = match rng.below(10) {
                        0 => -1,
                        1 => 1,
                        _ => 0,
                    };
                    PendingIntent {
                        template_id: template.id,
                        request_id: RequestId::parse(format!("r{rid}")).expect("valid"),
                        coupon_id: coupon(rid, rng.below(5) == 0),
                        // A request id is only ever one user's (Redis refuses another).
                        user_id: UserId::parse(format!("u{}", rid % 4)).expect("valid"),
                        epoch: epoch + epoch_shift,
                        claimed_at_ms: 1_700_000_000_000,
                    }
                })
                .collect();
            let got = arbiter::decide_batch(&pg, &template, &intents, arbitration).await?;
            let want = reference.decide(&intents, epoch, stock, i64::from(limit), enforce);
            let shown: Vec<_> = intents
                .iter()
                .map(|i| (&i.request_id, &i.user_id, i.epoch - epoch))
                .collect();
            assert_eq!(
                got, want,
                "seed {seed}: stock {stock}, limit {limit}, batch {shown:?}"
            );
        }
        let counted: i64 =
            sqlx::query_scalar("SELECT count(*) FROM user_coupon WHERE template_id = $1")
                .bind(template.id)
                .fetch_one(&pg)
                .await?;
        assert_eq!(counted, reference.counted, "seed {seed}: rows stored");
    }
    pg.close().await;
    Ok(())
}

#[tokio::test]
async fn batch_verdicts_follow_arrival_order_like_the_sequential_rule() -> anyhow::Result<()> {
    batches_match_the_sequential_rule(Arbitration::Enforced).await
}

#[tokio::test]
async fn without_arbitration_every_new_request_is_stored() -> anyhow::Result<()> {
    batches_match_the_sequential_rule(Arbitration::TrustRedis).await
}
