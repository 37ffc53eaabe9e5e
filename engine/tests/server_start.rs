//! `coupon-server` refuses to start on empty secrets: several servers share them, and an
//! empty admin token or user-token secret would silently weaken every one.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn start_with(var: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_coupon-server"))
        .env(var, "")
        // Never reached: the check comes before any connection.
        .env("COUPON_REDIS_URL", "redis://127.0.0.1:1/")
        .env("COUPON_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_empty_admin_token_stops_the_start() {
    let (ok, err) = start_with("COUPON_ADMIN_TOKEN");
    assert!(!ok);
    assert!(err.contains("COUPON_ADMIN_TOKEN"), "{err}");
}

#[test]
fn an_empty_user_token_secret_stops_the_start() {
    let (ok, err) = start_with("COUPON_USER_TOKEN_SECRET");
    assert!(!ok);
    assert!(err.contains("COUPON_USER_TOKEN_SECRET"), "{err}");
}
