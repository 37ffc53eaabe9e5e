//! `coupon-loadtest` against servers in other processes, as a user runs it (issue 12): a
//! defect mutant served out of process is caught through `--target`; `--servers N` starts
//! N `coupon-server` processes and spreads the load over them; generators that only record
//! (`--no-audit`) are audited together by `coupon-loadtest audit RUN_DIR…`.
//!
//! Needs the workspace's binaries: `coupon-server`, `coupon-server-mutants` and
//! `coupon-loadtest`. `cargo test --workspace` builds them before it runs any test, because
//! their packages have tests of their own binaries (`server_start`, `exit_codes`).

// A panic is how a test reports a wrong answer.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use coupon_testkit::{TestEnv, local::free_port};
use serde_json::{Value, json};

const ADMIN: &str = "servers-test-admin";

fn bin(name: &str) -> PathBuf {
    // This test is a package of its own, so Cargo defines no `CARGO_BIN_EXE_` for it: the
    // workspace's binaries are beside the directory of test binaries (`target/<profile>/`).
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(Path::parent).unwrap().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace's binaries (cargo build --workspace --bins)",
        path.display()
    );
    path
}

/// A server process on the environment's database and namespace; killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(binary: &str, args: &[&str], env: &TestEnv) -> Server {
    let port = free_port().unwrap();
    let child = Command::new(bin(binary))
        .args(args)
        .env("COUPON_LISTEN", format!("127.0.0.1:{port}"))
        .env("COUPON_REDIS_URL", env.redis.first_url())
        .env("COUPON_DATABASE_URL", &env.database_url)
        .env("COUPON_REDIS_NAMESPACE", &env.namespace)
        .env("COUPON_ADMIN_TOKEN", ADMIN)
        .env("COUPON_USER_TOKEN_SECRET", "servers-test-secret")
        .env("COUPON_DB_POOL_SIZE", "8")
        // The bench's setting: a server on one worker serves whole runs.
        .env("COUPON_WORKER_THREADS", "1")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    loop {
        let health = reqwest::get(format!("{url}/healthz")).await;
        if health.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{binary} never became healthy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Server { child, url }
}

/// Runs coupon-loadtest with `args`; its exit code.
async fn loadtest<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> i32 {
    let out = tokio::process::Command::new(bin("coupon-loadtest"))
        .args(args)
        .env("COUPON_ADMIN_TOKEN", ADMIN)
        .env("RUST_LOG", "warn,coupon_loadtest=info")
        .output()
        .await
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out.status.code().unwrap_or(-1)
}

/// The report.json of the only run directory under `parent`.
fn report(parent: &Path) -> Value {
    let dirs: Vec<PathBuf> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    serde_json::from_str(&std::fs::read_to_string(dirs[0].join("report.json")).unwrap()).unwrap()
}

fn run_dirs(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect()
}

const SALE: [&str; 8] = [
    "--duration",
    "4",
    "--users",
    "60",
    "--stock",
    "60",
    "--seed",
    "12",
];

/// Sales run against the D1 server before its race must have shown.
const D1_SALES: usize = 3;

#[tokio::test(flavor = "multi_thread")]
async fn a_mutant_served_out_of_process_is_caught_through_target() {
    let env = TestEnv::new().await.unwrap();
    let server = serve("coupon-server-mutants", &["--mutant", "d1"], &env).await;
    // D1's race is a race: it oversells when two claims read the last stock side by side,
    // which a machine busy with other tests can keep from happening in one short sale (CI
    // saw one sell exactly its stock). Up to three sales, each a fresh template, the way a
    // tester runs a racy defect more than once; the first one caught ends the test.
    let mut seen = Vec::new();
    for sale in 0..D1_SALES {
        let reports = tempfile::tempdir().unwrap();
        let dir = reports.path().display().to_string();
        let seed = (12 + sale).to_string();
        let mut args = vec![
            "flash-sale",
            "--target",
            &server.url,
            "--report-dir",
            &dir,
            "--goose-quiet",
        ];
        // Every Goose user at once and stock to spare at the start, so the sale sells out
        // with all of them claiming: the race needs claims side by side at the edge.
        args.extend([
            "--duration",
            "4",
            "--users",
            "150",
            "--increase-rate",
            "1000",
            "--stock",
            "2000",
            "--seed",
            &seed,
        ]);
        let exit = loadtest(&args).await;
        assert!(exit <= 1, "sale {sale} could not run: exit {exit}");
        let r = report(reports.path());
        let failed: Vec<String> = r["invariants"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["passed"] == false)
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(exit == 1, !failed.is_empty(), "{failed:?}");
        // D1 trusts Redis but keeps Postgres's counter as the engine does, so it is caught
        // by what its race issues: more coupons than the stock (I1) or a user over the
        // limit (I3).
        if failed.iter().any(|id| id == "I1" || id == "I3") {
            return;
        }
        seen.push(failed);
    }
    panic!("the D1 server was not caught by I1 or I3 in {D1_SALES} sales: {seen:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_started_by_the_run_share_the_load_and_the_audit() {
    let reports = tempfile::tempdir().unwrap();
    let dir = reports.path().display().to_string();
    let mut args = vec![
        "flash-sale",
        "--servers",
        "3",
        "--spread",
        "request",
        "--report-dir",
        &dir,
        "--goose-quiet",
    ];
    args.extend(SALE);
    assert_eq!(loadtest(&args).await, 0);
    let r = report(reports.path());
    let servers = r["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{servers:?}");
    let total: u64 = servers
        .iter()
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(total, r["throughput"]["requests"].as_u64().unwrap());
    for s in servers {
        // Round robin: each server gets a third, give or take the last round.
        let share = s["share"].as_f64().unwrap();
        assert!((0.3..0.37).contains(&share), "{s}");
    }
    assert_eq!(
        r["throughput"]["claims_granted"], 60,
        "sold out across three servers"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn record_only_generators_are_audited_together() {
    let env = TestEnv::new().await.unwrap();
    let server = serve("coupon-server", &[], &env).await;
    let work = tempfile::tempdir().unwrap();
    let created: Value = reqwest::Client::new()
        .post(format!("{}/v1/templates", server.url))
        .bearer_auth(ADMIN)
        .json(&json!({
            "name": "distributed sale", "total_stock": 80, "per_user_limit": 1,
            "discount": {"kind": "fixed", "amount": 100}, "valid_days": 1,
            "refund_policy": "return_to_stock"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    let out = |g: &str| work.path().join(g).display().to_string();
    let (a, b) = (out("a"), out("b"));
    let generator = |dir: &str| {
        vec![
            "flash-sale",
            "--target",
            &server.url,
            "--template",
            id,
            "--no-audit",
            "--duration",
            "3",
            "--users",
            "30",
            "--customers",
            "100",
            "--goose-quiet",
            "--report-dir",
            dir,
        ]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<String>>()
    };
    let (ga, gb) = (generator(&a), generator(&b));
    let (ca, cb) = tokio::join!(loadtest(&ga), loadtest(&gb),);
    assert_eq!((ca, cb), (0, 0), "record-only generators pass");
    let merged = out("merged");
    let mut args: Vec<String> = vec!["audit".into(), "--report-dir".into(), merged.clone()];
    args.extend(run_dirs(Path::new(&a)));
    args.extend(run_dirs(Path::new(&b)));
    assert_eq!(loadtest(&args).await, 0);
    let r = report(Path::new(&merged));
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let requests: u64 = runs
        .iter()
        .map(|f| f["throughput"]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(r["throughput"]["requests"].as_u64().unwrap(), requests);
    let rates: f64 = runs
        .iter()
        .map(|f| f["throughput"]["requests_per_sec"].as_f64().unwrap())
        .sum();
    assert!((r["throughput"]["requests_per_sec"].as_f64().unwrap() - rates).abs() < 0.1);
    assert_eq!(
        r["throughput"]["claims_granted"], 80,
        "200 shoppers, stock 80"
    );
    assert!(
        r["invariants"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["passed"] == true)
    );
}

/// The bench as its help shows it, with a report directory relative to where it runs: the
/// `pgbench` anchors (which run in a directory of their own) and the sync row they anchor
/// are measured.
#[tokio::test(flavor = "multi_thread")]
async fn the_bench_measures_its_pgbench_anchors_under_a_relative_report_dir() {
    let cwd = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(bin("coupon-loadtest"))
        .args(["bench", "--seconds", "1", "--rounds", "1"])
        .args(["--report-dir", "reports"])
        .current_dir(cwd.path())
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = report(&cwd.path().join("reports"));
    let rows = r["rows"].as_array().unwrap();
    for key in ["pgbench_insert", "pgbench_hot_row", "http_sync_granted"] {
        let row = rows.iter().find(|row| row["key"] == key).unwrap();
        assert!(
            row["per_sec"].as_f64().is_some_and(|v| v > 0.0),
            "{key} not measured: {row}"
        );
    }
}

/// The open model against a server of its own: arrivals far beyond what one virtual user can
/// carry are dropped and counted, never skipped silently; the ones that ran are recorded and
/// audited like a closed run's; the response time, taken from the intended start, is never
/// below the service time.
#[tokio::test(flavor = "multi_thread")]
async fn an_arrival_spike_counts_what_it_drops_and_audits_what_it_sent() {
    let env = TestEnv::new().await.unwrap();
    let server = serve("coupon-server", &[], &env).await;
    let reports = tempfile::tempdir().unwrap();
    let dir = reports.path().display().to_string();
    let args = [
        "flash-sale",
        "--target",
        &server.url,
        "--arrival-profile",
        "200ms:20000,1s:20000",
        "--max-in-flight",
        "1",
        "--stock",
        "40",
        "--customers",
        "300",
        "--seed",
        "7",
        "--report-dir",
        &dir,
        "--goose-quiet",
    ];
    assert_eq!(loadtest(&args).await, 0);
    let r = report(reports.path());
    let open = &r["open_model"];
    let (scheduled, started, dropped) = (
        open["scheduled"].as_u64().unwrap(),
        open["started"].as_u64().unwrap(),
        open["dropped"].as_u64().unwrap(),
    );
    // 2,000 in the ramp, 20,000 in the hold, and the one at time zero.
    assert!((22_000..=22_002).contains(&scheduled), "{open}");
    assert_eq!(started + dropped, scheduled, "{open}");
    assert!(
        dropped > 0 && started > 100,
        "one virtual user cannot carry 20,000/s: {open}"
    );
    assert!(open["peak_in_flight"].as_u64().unwrap() <= 1, "{open}");
    assert!(
        open["response_ms"]["p99"].as_f64().unwrap() >= open["service_ms"]["p99"].as_f64().unwrap(),
        "{open}"
    );
    assert_eq!(r["throughput"]["claims_granted"], 40, "the stock sold out");
    let invariants = r["invariants"].as_array().unwrap();
    assert!(!invariants.is_empty());
    assert!(
        invariants.iter().all(|i| i["passed"] == true),
        "{invariants:?}"
    );
}
