//! `coupon-server` refuses bad settings before it connects: empty secrets (several servers
//! share them, and an empty admin token or user-token secret would silently weaken every
//! one), a worker count of zero, a mutant flag it does not serve.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// Starts `coupon-server` with `var` set to `value`: whether it succeeded, and its stderr.
fn start_with(var: &str, value: &str) -> (bool, String) {
    let server = env!("CARGO_BIN_EXE_coupon-server").as_ref();
    start(server, &[], &[(var, value)])
}

/// Starts `server` with `args`, `vars` and stores that refuse connections (every check here
/// must come before any connection): whether it succeeded, and its stderr.
fn start(server: &std::path::Path, args: &[&str], vars: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(server)
        .args(args)
        .envs(vars.iter().copied())
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
    let (ok, err) = start_with("COUPON_ADMIN_TOKEN", "");
    assert!(!ok);
    assert!(err.contains("COUPON_ADMIN_TOKEN"), "{err}");
}

#[test]
fn an_empty_user_token_secret_stops_the_start() {
    let (ok, err) = start_with("COUPON_USER_TOKEN_SECRET", "");
    assert!(!ok);
    assert!(err.contains("COUPON_USER_TOKEN_SECRET"), "{err}");
}

/// `coupon-server` never serves a mutant, whatever features the build unified: the flag is
/// refused with a pointer to the binary that has it, before any connection.
#[test]
fn coupon_server_refuses_the_mutant_flag() {
    let (started, err) = with_mutant_flag(env!("CARGO_BIN_EXE_coupon-server").as_ref(), "d1");
    assert!(!started);
    assert!(err.contains("coupon-server-mutants"), "{err}");
    assert!(!server_help().contains("--mutant"));
}

/// What `coupon-server --help` prints.
fn server_help() -> String {
    let help = Command::new(env!("CARGO_BIN_EXE_coupon-server"))
        .arg("--help")
        .output()
        .unwrap();
    String::from_utf8_lossy(&help.stdout).into_owned()
}

/// A worker count of zero is refused by name before anything starts; `--help` documents the
/// flag with its variable.
#[test]
fn zero_worker_threads_are_refused() {
    let (ok, err) = start_with("COUPON_WORKER_THREADS", "0");
    assert!(!ok);
    assert!(err.contains("--worker-threads"), "{err}");
    assert!(server_help().contains("COUPON_WORKER_THREADS"));
}

/// `coupon-server-mutants`, which Cargo builds beside `coupon-server` whenever the `mutants`
/// feature is on (a workspace build: the harness crates enable it). Cargo does not define
/// `CARGO_BIN_EXE_` for a binary whose required features come from a dev-dependency, so it
/// is found next to the other.
fn mutants_binary() -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_coupon-server"))
        .with_file_name("coupon-server-mutants");
    assert!(
        path.is_file(),
        "{} is missing: build with the mutants feature (cargo build --workspace --bins)",
        path.display()
    );
    path
}

/// The mutant server knows the names of `Variant` and refuses others before connecting.
#[test]
fn coupon_server_mutants_names_its_mutants() {
    let (started, err) = with_mutant_flag(&mutants_binary(), "d99");
    assert!(!started);
    assert!(err.contains("d1") && err.contains("d8"), "{err}");
}

/// Starts `server` with `--mutant NAME`: whether it succeeded, and its stderr.
fn with_mutant_flag(server: &std::path::Path, name: &str) -> (bool, String) {
    start(server, &["--mutant", name], &[])
}
