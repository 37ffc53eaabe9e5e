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
    domain::ids::{RequestId, UserId},
    store::{
        arbiter::{self, Arbitration, Ruling},
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
    ) -> Vec<Ruling> {
        intents
            .iter()
            .map(|i| {
                if i.epoch < epoch {
                    return Ruling::Fenced;
                }
                if i.epoch > epoch {
                    return Ruling::EpochAhead;
                }
                if let Some((coupon_id, owner)) = self.known.get(i.request_id.as_str()) {
                    return if *coupon_id == i.coupon_id {
                        Ruling::Stored
                    } else {
                        Ruling::Duplicate {
                            coupon_id: *coupon_id,
                            user_id: owner.clone(),
                        }
                    };
                }
                let has = self.held.get(i.user_id.as_str()).copied().unwrap_or(0);
                if enforce && self.counted >= stock {
                    return Ruling::StockEmpty;
                }
                if enforce && has >= limit {
                    return Ruling::UserLimit;
                }
                self.counted += 1;
                *self.held.entry(i.user_id.to_string()).or_default() += 1;
                self.known.insert(
                    i.request_id.to_string(),
                    (i.coupon_id, i.user_id.to_string()),
                );
                Ruling::Stored
            })
            .collect()
    }
}

async fn batches_match_the_sequential_rule(arbitration: Arbitration) -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let seed = crate::seed_from_clock();
    println!("arbiter batches: seed {seed}");
    let mut rng = Rng(seed);
    let enforce = arbitration == Arbitration::Enforced;
    for _ in 0..25 {
        let stock = 1 + rng.below(12) as i64;
        let limit = 1 + rng.below(3) as i32;
        let (template, epoch) = crate::sale(&env, &pg, "batches", stock, limit).await?;
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
        // Trusting Redis or not, the counter the audit checks is the rows' count up to the
        // stock: a mutant that trusts Redis must be caught by what it stores (past the
        // stock, an oversell), not by its counter (I2).
        let counter: i64 =
            sqlx::query_scalar("SELECT counted FROM template_stock WHERE template_id = $1")
                .bind(template.id)
                .fetch_one(&pg)
                .await?;
        assert_eq!(counter, counted.min(stock), "seed {seed}: counter and rows");
    }
    pg.close().await;
    Ok(())
}

/// Many sales at once: batches spanning several templates, decided in one transaction
/// (`coupon_decide_claims_across`), must give each template exactly the verdicts its own
/// sequential rule gives — through the set-based path (every part fits), the per-template
/// fallback of a part that does not (stock, limit, epoch) and the whole batch's fallback
/// when a request id is already stored.
#[tokio::test]
async fn batches_over_several_templates_match_each_templates_sequential_rule() -> anyhow::Result<()>
{
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let seed = crate::seed_from_clock();
    println!("arbiter batches over templates: seed {seed}");
    let mut rng = Rng(seed);
    for _ in 0..10 {
        let mut sales = Vec::new();
        for _ in 0..2 + rng.below(4) {
            let stock = 1 + rng.below(8) as i64;
            let limit = 1 + rng.below(2) as i32;
            let (template, epoch) = crate::sale(&env, &pg, "across", stock, limit).await?;
            sales.push((template, epoch, stock, limit, Reference::default()));
        }
        for _ in 0..6 {
            let mut parts: Vec<Vec<PendingIntent>> = vec![Vec::new(); sales.len()];
            for _ in 0..1 + rng.below(16) {
                let s = rng.below(sales.len() as u64) as usize;
                let (template, epoch, ..) = &sales[s];
                let rid = rng.below(8);
                let epoch_shift = match rng.below(20) {
                    0 => -1,
                    1 => 1,
                    _ => 0,
                };
                parts[s].push(PendingIntent {
                    template_id: template.id,
                    request_id: RequestId::parse(format!("r{rid}")).expect("valid"),
                    coupon_id: Uuid::from_u128(
                        template
                            .id
                            .as_uuid()
                            .as_u128()
                            .wrapping_add(u128::from(rid)),
                    ),
                    user_id: UserId::parse(format!("u{}", rid % 3)).expect("valid"),
                    epoch: epoch + epoch_shift,
                    claimed_at_ms: 1_700_000_000_000,
                });
            }
            let batches: Vec<_> = sales
                .iter()
                .zip(&parts)
                .filter(|(_, p)| !p.is_empty())
                .map(|((t, ..), p)| (t, p.as_slice()))
                .collect();
            let window = if rng.below(2) == 0 {
                arbiter::Window::AsAdmitted
            } else {
                arbiter::Window::JudgedByPostgres
            };
            let mut conn = pg.acquire().await?;
            let got = arbiter::decide_batches_together(&mut conn, &batches, window).await?;
            let mut got = got.into_iter();
            for ((_, epoch, stock, limit, reference), intents) in sales.iter_mut().zip(&parts) {
                if intents.is_empty() {
                    continue;
                }
                let want = reference.decide(intents, *epoch, *stock, i64::from(*limit), true);
                let shown: Vec<_> = intents
                    .iter()
                    .map(|i| (&i.request_id, &i.user_id, i.epoch - *epoch))
                    .collect();
                assert_eq!(
                    got.next(),
                    Some(want),
                    "seed {seed}: stock {stock}, limit {limit}, part {shown:?}"
                );
            }
        }
        for (template, _, stock, _, reference) in &sales {
            let (rows, counter): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM user_coupon WHERE template_id = $1), \
                        (SELECT counted FROM template_stock WHERE template_id = $1)",
            )
            .bind(template.id)
            .fetch_one(&pg)
            .await?;
            assert_eq!(rows, reference.counted, "seed {seed}: rows stored");
            assert_eq!(
                counter, rows,
                "seed {seed}: counter and rows (stock {stock})"
            );
        }
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

/// Batches of one template decided at once on several connections, as several servers'
/// group commits do: each inserts its rows before it takes the counter row, so their
/// inserts overlap. Users and request ids are shared across the deciders (a retry racing
/// its original elsewhere): a shared request id's insert waits for the batch that holds it.
/// Rows never exceed the stock nor a user's limit, the counter equals the rows, and every
/// verdict names a row that exists. Random timing rarely lines two batches of one user up
/// before either commits; the race itself is forced by the held-counter tests below.
async fn overlapping_batches(stock: i64, limit: i32, users: u64) -> anyhow::Result<()> {
    const DECIDERS: u64 = 4;
    const BATCHES: usize = 40;
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let seed = crate::seed_from_clock();
    println!("overlapping batches: seed {seed}");
    let (template, epoch) = crate::sale(&env, &pg, "overlapping batches", stock, limit).await?;
    let deciders = (0..DECIDERS).map(|d| {
        let (pg, template) = (pg.clone(), template.clone());
        tokio::spawn(async move {
            let mut rng = Rng(seed.wrapping_add(d.wrapping_mul(0x9E37_79B9)) | 1);
            let mut answered = Vec::new();
            for _ in 0..BATCHES {
                let n = 1 + rng.below(8) as usize;
                let intents: Vec<PendingIntent> = (0..n)
                    .map(|_| {
                        // One request id in sixteen is shared by every decider.
                        let rid = if rng.below(16) == 0 {
                            format!("shared-{}", rng.below(20))
                        } else {
                            format!("d{d}-{}", rng.below(1_000_000))
                        };
                        let user = rid
                            .bytes()
                            .fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(b))
                            % users;
                        PendingIntent {
                            template_id: template.id,
                            coupon_id: Uuid::new_v4(),
                            request_id: RequestId::parse(rid).expect("valid"),
                            user_id: UserId::parse(format!("u{user}")).expect("valid"),
                            epoch,
                            claimed_at_ms: 1_700_000_000_000,
                        }
                    })
                    .collect();
                let verdicts =
                    arbiter::decide_batch(&pg, &template, &intents, Arbitration::Enforced).await?;
                answered.extend(intents.into_iter().zip(verdicts));
            }
            anyhow::Ok(answered)
        })
    });
    let mut answered = Vec::new();
    for d in deciders {
        answered.extend(d.await??);
    }
    let rows: Vec<(Uuid, String, String)> = sqlx::query_as(
        "SELECT id, user_id, claim_request_id FROM user_coupon WHERE template_id = $1",
    )
    .bind(template.id)
    .fetch_all(&pg)
    .await?;
    let counted: i64 =
        sqlx::query_scalar("SELECT counted FROM template_stock WHERE template_id = $1")
            .bind(template.id)
            .fetch_one(&pg)
            .await?;
    assert_eq!(counted, rows.len() as i64, "seed {seed}: counter and rows");
    assert!(
        counted <= stock,
        "seed {seed}: {counted} rows on a stock of {stock}"
    );
    let mut per_user: HashMap<&str, i32> = HashMap::new();
    for (_, user, _) in &rows {
        *per_user.entry(user).or_default() += 1;
    }
    let over: Vec<_> = per_user.iter().filter(|(_, n)| **n > limit).collect();
    assert!(
        over.is_empty(),
        "seed {seed}: users above the limit of {limit}: {over:?}"
    );
    let by_rid: HashMap<&str, Uuid> = rows
        .iter()
        .map(|(id, _, rid)| (rid.as_str(), *id))
        .collect();
    for (intent, verdict) in &answered {
        let stored = by_rid.get(intent.request_id.as_str());
        match verdict {
            Ruling::Stored => assert_eq!(
                stored,
                Some(&intent.coupon_id),
                "seed {seed}: a stored verdict without its row"
            ),
            Ruling::Duplicate { coupon_id, .. } => assert_eq!(
                stored,
                Some(coupon_id),
                "seed {seed}: a duplicate naming no row"
            ),
            Ruling::StockEmpty | Ruling::UserLimit => {}
            other => panic!("seed {seed}: unexpected verdict {other:?}"),
        }
    }
    assert!(
        answered.iter().any(|(_, v)| v.is_refusal()),
        "seed {seed}: the stock or the limits were never reached"
    );
    pg.close().await;
    Ok(())
}

#[tokio::test]
async fn overlapping_batches_never_exceed_a_users_limit() -> anyhow::Result<()> {
    overlapping_batches(100_000, 1, 500).await
}

#[tokio::test]
async fn overlapping_batches_never_exceed_the_stock() -> anyhow::Result<()> {
    overlapping_batches(150, 5, 1_000).await
}

/// A new claim intent of `template` at `epoch`, with a coupon id of its own.
fn new_intent(
    template: &coupon_engine::Template,
    epoch: i64,
    rid: &str,
    user: &str,
) -> PendingIntent {
    PendingIntent {
        template_id: template.id,
        coupon_id: Uuid::new_v4(),
        request_id: RequestId::parse(rid).expect("valid"),
        user_id: UserId::parse(user).expect("valid"),
        epoch,
        claimed_at_ms: 1_700_000_000_000,
    }
}

/// The race the overlap opens, made to happen: a batch has inserted its row and holds the
/// counter row (its transaction still open) when another batch for the same user, or for
/// the last coupon, starts on another connection. The second must wait for the first and
/// then refuse: a check made on its own snapshot before the lock would pass both.
async fn a_batch_waits_for_the_one_holding_the_counter(
    stock: i64,
    want: Ruling,
) -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let (template, epoch) = crate::sale(&env, &pg, "held counter", stock, 1).await?;
    // The same user when the stock is ample, another one when it is the last coupon.
    let intent = |rid: &str, user: &str| new_intent(&template, epoch, rid, user);
    let second_user = if stock == 1 { "other" } else { "same" };
    let mut first = pg.begin().await?;
    let verdicts = arbiter::decide_batch_on(
        &mut first,
        &template,
        &[intent("first", "same")],
        Arbitration::Enforced,
    )
    .await?;
    assert_eq!(verdicts, [Ruling::Stored]);
    let second = {
        let (pg, template, intent) = (pg.clone(), template.clone(), intent("second", second_user));
        tokio::spawn(async move {
            arbiter::decide_batch(&pg, &template, &[intent], Arbitration::Enforced).await
        })
    };
    waits_on_a_lock(&pg).await?;
    assert!(
        !second.is_finished(),
        "the second batch did not wait for the counter row"
    );
    first.commit().await?;
    assert_eq!(second.await??, [want]);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM user_coupon WHERE template_id = $1")
        .bind(template.id)
        .fetch_one(&pg)
        .await?;
    assert_eq!(rows, 1);
    pg.close().await;
    Ok(())
}

#[tokio::test]
async fn a_batch_for_a_user_at_the_limit_waits_then_refuses() -> anyhow::Result<()> {
    a_batch_waits_for_the_one_holding_the_counter(100, Ruling::UserLimit).await
}

#[tokio::test]
async fn a_batch_for_the_last_coupon_waits_then_refuses() -> anyhow::Result<()> {
    a_batch_waits_for_the_one_holding_the_counter(1, Ruling::StockEmpty).await
}

/// A retry racing its original on another server, in a batch that also holds a request id
/// already stored. Every batch inserts its rows before it takes the counter row, so this one
/// must wait for the batch that is inserting the racing request id before it takes the
/// counter: if it took the counter first, the two would wait on each other (Postgres aborts
/// one of them as a deadlock after `deadlock_timeout`). The stored request id is first in
/// request-id order, so the batch meets it before the racing one.
#[tokio::test]
async fn a_batch_with_a_stored_request_id_waits_for_one_in_flight_before_the_counter()
-> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let pg = sqlx::PgPool::connect(&env.database_url).await?;
    let (template, epoch) = crate::sale(&env, &pg, "in flight", 100, 5).await?;
    let intent = |rid: &str, user: &str| new_intent(&template, epoch, rid, user);
    let stored = intent("a-stored", "first");
    let verdicts = arbiter::decide_batch(
        &pg,
        &template,
        std::slice::from_ref(&stored),
        Arbitration::Enforced,
    )
    .await?;
    assert_eq!(verdicts, [Ruling::Stored]);
    // The other server's batch: its row inserted, the counter row not yet taken.
    let racing = intent("z-racing", "second");
    let mut elsewhere = pg.begin().await?;
    sqlx::query(
        "INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id, \
         claimed_at, valid_from, valid_until) \
         VALUES ($1, $2, $3, 'issued', $4, now(), now(), now() + interval '1 day')",
    )
    .bind(racing.coupon_id)
    .bind(template.id)
    .bind(racing.user_id.as_str())
    .bind(racing.request_id.as_str())
    .execute(&mut *elsewhere)
    .await?;
    let batch = {
        let (pg, template) = (pg.clone(), template.clone());
        let intents = [intent("a-stored", "first"), intent("z-racing", "second")];
        tokio::spawn(async move {
            arbiter::decide_batch(&pg, &template, &intents, Arbitration::Enforced).await
        })
    };
    waits_on_a_lock(&pg).await?;
    assert!(
        !batch.is_finished(),
        "the batch did not wait for the request id being inserted elsewhere"
    );
    // The other batch takes the counter row, as every batch does before it commits.
    sqlx::query("UPDATE template_stock SET counted = counted + 1 WHERE template_id = $1")
        .bind(template.id)
        .execute(&mut *elsewhere)
        .await?;
    elsewhere.commit().await?;
    assert_eq!(
        batch.await??,
        [
            Ruling::Duplicate {
                coupon_id: stored.coupon_id,
                user_id: "first".into(),
            },
            Ruling::Duplicate {
                coupon_id: racing.coupon_id,
                user_id: "second".into(),
            },
        ]
    );
    pg.close().await;
    Ok(())
}

/// Returns once a backend of this database waits on a lock, the state the test must reach
/// before it lets the holder go: read from Postgres, not guessed from a sleep.
async fn waits_on_a_lock(pg: &sqlx::PgPool) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pg)
        .await?;
        if waiting > 0 {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no backend waited on a lock within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
