//! What one claim batch costs Postgres, in buffers touched (`EXPLAIN (ANALYZE, BUFFERS)` of
//! `coupon_decide_claims` on the connection whose cached plan the batches used): a few pages
//! a claim, whatever the statistics said when the plan was made, however many coupons the
//! sale has issued and however many its users hold of other templates.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use coupon_engine::{
    Template,
    domain::ids::{RequestId, UserId},
    store::{
        arbiter::{self, Arbitration, Ruling},
        redis::PendingIntent,
    },
};
use coupon_testkit::TestEnv;
use sqlx::PgPool;
use uuid::Uuid;

const SIZE: usize = 40;
/// Batches sold before the one explained.
const BATCHES: usize = 75;
/// Measured: ~13 a claim (two probes, a heap row, four index entries) with the plan the
/// statement is meant to have.
const BUFFERS_PER_CLAIM: u64 = 25;
/// Each test's template allows this many coupons per user.
const LIMIT: i32 = 5;

/// One connection, so every batch runs the plan cached at the first; autovacuum off for
/// `user_coupon`, so its statistics stay what the test's own `ANALYZE` made them.
async fn one_connection(env: &TestEnv) -> anyhow::Result<PgPool> {
    let pg = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await?;
    sqlx::query("ALTER TABLE user_coupon SET (autovacuum_enabled = false)")
        .execute(&pg)
        .await?;
    Ok(pg)
}

fn intent(template: &Template, epoch: i64, request: String, user: String) -> PendingIntent {
    PendingIntent {
        template_id: template.id,
        request_id: RequestId::parse(request).expect("valid"),
        coupon_id: Uuid::now_v7(),
        user_id: UserId::parse(user).expect("valid"),
        epoch,
        claimed_at_ms: 1_700_000_000_000,
    }
}

/// `size` intents of users no one saw before, scattered as real users are: ids in insertion
/// order would let a scan of the template's rows stay on a few heap pages. `n` counts the
/// intents made so far.
fn newcomers(template: &Template, epoch: i64, n: &mut u64, size: usize) -> Vec<PendingIntent> {
    (0..size)
        .map(|_| {
            *n += 1;
            let user = format!("plan-user-{:016x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            intent(template, epoch, format!("plan-{n}"), user)
        })
        .collect()
}

/// A sale that has issued `1 + BATCHES × SIZE` coupons to newcomers, one batch at a time.
async fn sell_to_newcomers(
    pg: &PgPool,
    template: &Template,
    epoch: i64,
    n: &mut u64,
) -> anyhow::Result<()> {
    for size in std::iter::once(1).chain(std::iter::repeat_n(SIZE, BATCHES)) {
        stored(pg, template, &newcomers(template, epoch, n, size)).await?;
    }
    Ok(())
}

async fn stored(pg: &PgPool, template: &Template, intents: &[PendingIntent]) -> anyhow::Result<()> {
    let verdicts = arbiter::decide_batch(pg, template, intents, Arbitration::Enforced).await?;
    assert!(
        verdicts.iter().all(|v| *v == Ruling::Stored),
        "{verdicts:?}"
    );
    Ok(())
}

/// Runs `intents` as one more batch, explained on the same connection: the function scan's
/// buffer counts include the function's own statements, run with the plan cached earlier.
/// Returns the buffers touched and the plan.
async fn explained(
    pg: &PgPool,
    template: &Template,
    epoch: i64,
    intents: &[PendingIntent],
) -> anyhow::Result<(u64, Vec<String>)> {
    let n = intents.len();
    let ids: Vec<Uuid> = intents.iter().map(|i| i.coupon_id).collect();
    let users: Vec<&str> = intents.iter().map(|i| i.user_id.as_str()).collect();
    let rids: Vec<&str> = intents.iter().map(|i| i.request_id.as_str()).collect();
    let epochs = vec![epoch; n];
    let at = vec![time::OffsetDateTime::now_utc(); n];
    let until = vec![time::OffsetDateTime::now_utc() + time::Duration::days(30); n];
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM coupon_decide_claims($1, true, $2, \
         $3, $4, $5, $6, $7, $7, $8)",
    )
    .bind(template.id)
    .bind(i64::from(LIMIT))
    .bind(&ids)
    .bind(&users)
    .bind(&rids)
    .bind(&epochs)
    .bind(&at)
    .bind(&until)
    .fetch_all(pg)
    .await?;
    let buffers = crate::shared_buffers(&plan)
        .unwrap_or_else(|| panic!("no buffer counts in the plan: {plan:#?}"));
    Ok((buffers, plan))
}

/// Postgres caches the batch statement's plan on a connection at its first batch, and a plan
/// made while `user_coupon` was analyzed empty once looked request ids up through the
/// per-user index, filtering every coupon of the template per request id: each batch then
/// cost what the sale had issued so far (25 ms for 40 claims after 6,000 rows), until
/// autovacuum analyzed the table again. A deployment analyzed right after its migrations
/// would have sold its first sale that way.
#[tokio::test]
async fn a_batch_planned_on_an_empty_table_still_probes_by_index() -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let pg = one_connection(&env).await?;
    sqlx::query("ANALYZE user_coupon").execute(&pg).await?;
    let (template, epoch) = crate::sale(&env, &pg, "plan", 1_000_000, LIMIT).await?;
    let mut n = 0u64;
    sell_to_newcomers(&pg, &template, epoch, &mut n).await?;
    let (buffers, plan) = explained(
        &pg,
        &template,
        epoch,
        &newcomers(&template, epoch, &mut n, SIZE),
    )
    .await?;
    pg.close().await;
    // ~110 a claim after 3,000 coupons with the plan that filtered the template's rows per
    // request id (and growing with them).
    assert!(
        buffers < BUFFERS_PER_CLAIM * SIZE as u64,
        "{buffers} buffers for a batch of {SIZE} after {BATCHES} batches: {plan:#?}"
    );
    Ok(())
}

/// Users come to a sale with a history: coupons of earlier templates, used, expired. The
/// per-user probe (how many of this template's coupons the user holds) must reach only the
/// user's coupons of this template. Keyed on the user alone (migration ..05) it fetched
/// every coupon the user ever held: 26,012 buffers for this batch, 532 with the index of
/// migration ..06.
#[tokio::test]
async fn a_users_coupons_of_other_templates_cost_the_batch_nothing() -> anyhow::Result<()> {
    const HISTORY: i64 = 200;
    let env = TestEnv::new().await?;
    let pg = one_connection(&env).await?;
    // HISTORY coupons for each of the batch's users, interleaved as a table filled over
    // time is: each user's rows are spread over every page.
    sqlx::query(
        "INSERT INTO user_coupon (id, template_id, user_id, status, claim_request_id, \
         claimed_at, valid_from, valid_until) \
         SELECT gen_random_uuid(), gen_random_uuid(), 'history-user-' || (g % $1), 'expired', \
                'history-' || g, now(), now(), now() + interval '1 day' \
           FROM generate_series(1, $1 * $2) AS g",
    )
    .bind(SIZE as i64)
    .bind(HISTORY)
    .execute(&pg)
    .await?;
    sqlx::query("ANALYZE user_coupon").execute(&pg).await?;
    let (template, epoch) = crate::sale(&env, &pg, "plan", 1_000_000, LIMIT).await?;
    // The sale is under way: probing a user through the template's rows costs as much.
    sell_to_newcomers(&pg, &template, epoch, &mut 0).await?;
    let regulars: Vec<PendingIntent> = (0..SIZE)
        .map(|u| {
            intent(
                &template,
                epoch,
                format!("history-claim-{u}"),
                format!("history-user-{u}"),
            )
        })
        .collect();
    let (buffers, plan) = explained(&pg, &template, epoch, &regulars).await?;
    pg.close().await;
    // Keyed on the user alone: at least HISTORY heap fetches a claim; through the
    // template's rows, as many as the sale has issued.
    assert!(
        buffers < BUFFERS_PER_CLAIM * SIZE as u64,
        "{buffers} buffers for a batch of {SIZE} users holding {HISTORY} other coupons each: \
         {plan:#?}"
    );
    Ok(())
}
