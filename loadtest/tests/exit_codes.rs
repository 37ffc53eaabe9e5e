//! A bad option is refused before anything runs: exit code 3 (loadtest/README.md, "Exit
//! codes"), a message that names the option, and no report directory. No backend is needed:
//! nothing may be provisioned for a run that cannot start.

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// Runs coupon-loadtest with `args` and a fresh `--report-dir`: its exit code, its stderr,
/// and whether it wrote anything there.
fn refused(args: &[&str]) -> (Option<i32>, String, bool) {
    let reports = std::env::temp_dir().join(format!(
        "coupon-loadtest-exit-codes-{}-{}",
        std::process::id(),
        args.join("_").replace(['/', ' '], "-")
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_coupon-loadtest"))
        .args(args)
        .arg("--report-dir")
        .arg(&reports)
        // Nothing to reach: a run that tried to provision would fail differently.
        .env("COUPON_REDIS_URL", "redis://127.0.0.1:1/")
        .env("COUPON_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    let wrote = reports.exists();
    let _ = std::fs::remove_dir_all(&reports);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        wrote,
    )
}

#[test]
fn bad_options_exit_3_naming_the_option_and_write_nothing() {
    for (args, named) in [
        (&["flash-sale", "--duration", "0"][..], "--duration"),
        (&["flash-sale", "--nemesis", "nope"][..], "--nemesis"),
        (&["bench", "--rounds", "0"][..], "--rounds"),
        (&["lifecycle", "--users", "many"][..], "--users"),
        (&["flash-sale", "--arrival-rate", "0"][..], "--arrival-rate"),
        (
            &["flash-sale", "--arrival-rate", "fast"][..],
            "--arrival-rate",
        ),
        (
            &["flash-sale", "--arrival-profile", "1s:fast"][..],
            "--arrival-profile",
        ),
        (
            &["flash-sale", "--arrival-profile", "1h30:100"][..],
            "--arrival-profile",
        ),
        (
            &["flash-sale", "--arrival-profile", "1s:0,2s:0"][..],
            "--arrival-profile",
        ),
        (
            &["flash-sale", "--arrival-rate", "100", "--users", "5"][..],
            "--users",
        ),
        (
            &[
                "flash-sale",
                "--arrival-rate",
                "100",
                "--max-in-flight",
                "0",
            ][..],
            "--max-in-flight",
        ),
        (
            &["flash-sale", "--compare-closed", "10"][..],
            "--compare-closed",
        ),
        (
            &[
                "flash-sale",
                "--arrival-rate",
                "100",
                "--threshold",
                "p99<1s",
            ][..],
            "--threshold",
        ),
        (&["capacity", "--slo", "p98<50ms"][..], "--slo"),
        (&["capacity", "--slo", "p99<50min"][..], "--slo"),
        (
            &["capacity", "--slo", "p99<50ms", "--error-budget", "lots"][..],
            "--error-budget",
        ),
        (&["capacity", "--start-rate", "0"][..], "--start-rate"),
        (&["capacity", "--require-rate=-5"][..], "--require-rate"),
        (&["capacity", "--step-secs", "0"][..], "--step-secs"),
    ] {
        let (code, err, wrote) = refused(args);
        assert_eq!(code, Some(3), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} does not name {named}: {err}");
        assert!(!wrote, "{args:?} wrote a report directory");
    }
}
