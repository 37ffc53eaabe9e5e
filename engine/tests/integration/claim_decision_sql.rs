//! The claim decision's SQL has one place to be read: `engine/sql/claim_decision.sql`, every
//! function a claim batch runs as the migrations leave them. Eleven migrations redefine
//! them one change at a time; this test holds the file to what they define.

use coupon_testkit::TestEnv;

const CANONICAL: &str = include_str!("../../sql/claim_decision.sql");

/// What the migrated database defines, as Postgres prints it.
async fn defined(env: &TestEnv) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar(
        "SELECT string_agg(pg_get_functiondef(p.oid), E'\\n' ORDER BY p.oid::regprocedure::text) \
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'public' AND p.proname LIKE 'coupon\\_%'",
    )
    .fetch_one(env.engine.pool())
    .await?)
}

/// The file without its leading comment.
fn body(file: &str) -> String {
    file.lines()
        .skip_while(|l| l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_canonical_file_is_what_the_migrations_define() -> anyhow::Result<()> {
    let env = TestEnv::new().await?;
    let now = defined(&env).await?;
    if std::env::var_os("COUPON_BLESS_CLAIM_SQL").is_some() {
        let header: Vec<&str> = CANONICAL
            .lines()
            .take_while(|l| l.starts_with("--"))
            .collect();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sql/claim_decision.sql");
        std::fs::write(path, format!("{}\n{now}\n", header.join("\n")))?;
        return Ok(());
    }
    assert!(
        body(CANONICAL).trim_end() == now.trim_end(),
        "engine/sql/claim_decision.sql is not what the migrations define: a migration changed \
         the claim decision; rerun this test with COUPON_BLESS_CLAIM_SQL=1 and commit the file"
    );
    Ok(())
}

#[test]
fn a_changed_decision_is_told_apart() {
    let changed = CANONICAL.replacen("counted", "counted + 0", 1);
    assert_ne!(body(&changed), body(CANONICAL));
    assert!(body(CANONICAL).contains("CREATE OR REPLACE FUNCTION public.coupon_decide_claims("));
}
