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

/// Every secret and URL a deployment sets in the environment: `--help` shows none of them.
#[test]
fn help_never_prints_a_secret_from_the_environment() {
    let secrets = [
        ("COUPON_ADMIN_TOKEN", "admin-s3cr3t-1"),
        ("COUPON_USER_TOKEN_SECRET", "user-s3cr3t-2"),
        ("COUPON_SERVICE_TOKEN", "service-s3cr3t-3"),
        (
            "COUPON_REDIS_URL",
            "redis://:redis-s3cr3t-4@127.0.0.1:6379/",
        ),
        (
            "COUPON_REDIS_CLUSTER_NODES",
            "redis://:cluster-s3cr3t-5@127.0.0.1:7000/",
        ),
        (
            "COUPON_DATABASE_URL",
            "postgres://app:pg-s3cr3t-6@127.0.0.1:5432/test",
        ),
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_coupon-server"))
        .arg("--help")
        .envs(secrets)
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("COUPON_DATABASE_URL"), "{help}");
    assert!(!help.contains("s3cr3t"), "{help}");
}

/// The development secrets are in this repository: a server using them must not answer
/// other machines. Refused before any connection, with the variables to set.
#[test]
fn development_secrets_are_refused_on_a_listener_that_is_not_loopback() {
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let (ok, err) = start_with("COUPON_LISTEN", listen);
        assert!(!ok, "{listen}");
        assert!(
            err.contains("development secrets") && err.contains("COUPON_ADMIN_TOKEN"),
            "{err}"
        );
    }
}

/// A store URL's password never reaches the log or the error a failed start prints.
#[test]
fn a_failed_start_shows_store_urls_without_their_passwords() {
    let out = Command::new(env!("CARGO_BIN_EXE_coupon-server"))
        .env("COUPON_REDIS_URL", "redis://:redis-s3cr3t@127.0.0.1:1/")
        .env(
            "COUPON_DATABASE_URL",
            "postgres://app:pg-s3cr3t@127.0.0.1:1/none",
        )
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("127.0.0.1:1"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
}
