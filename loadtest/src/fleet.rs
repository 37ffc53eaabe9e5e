//! `--servers N`: N `coupon-server` processes on one database and Redis namespace, as
//! stateless servers behind a balancer run. Each gets a free loopback port and the same
//! secrets; its log goes to a file that is shown when it fails to start or to stop.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, bail};
use coupon_engine::{RedisTarget, Variant};
use coupon_testkit::local::free_port;
use tokio::process::{Child, Command};

/// What to start.
pub(crate) struct FleetSpec {
    /// How many processes.
    pub count: usize,
    /// The binary, if not the default next to this one.
    pub binary: Option<PathBuf>,
    /// Engine variant (a mutant needs `coupon-server-mutants`).
    pub variant: Variant,
    /// `sync` or `async`.
    pub persistence: &'static str,
    /// The run's Redis: one server, or a cluster (its seed nodes).
    pub redis: RedisTarget,
    /// The run's database.
    pub database_url: String,
    /// The run's Redis namespace.
    pub namespace: String,
    /// Admin token shared by all.
    pub admin_token: String,
    /// User-token secret shared by all.
    pub user_secret: String,
    /// The order service's token shared by all.
    pub service_token: String,
    /// Clock offsets by server index (`faketime`'s `+2s` / `-2s`): those servers run under
    /// libfaketime, their wall clock off by that much (`--nemesis clock-skew`).
    pub skews: Vec<(usize, String)>,
    /// A database URL of its own by server index (through a fault proxy of its own).
    pub database_url_of: Vec<(usize, String)>,
}

/// One running server process.
struct Process {
    child: Child,
    url: String,
    log: PathBuf,
    /// How to start it again (on the same port, with the same settings).
    command: std::sync::Arc<dyn Fn() -> anyhow::Result<Command> + Send + Sync>,
}

/// The running processes.
pub(crate) struct Fleet {
    processes: Vec<Process>,
    binary: PathBuf,
    logs: tempfile::TempDir,
}

/// libfaketime (Debian's `libfaketime`, pulled in by the `faketime` package), preloaded
/// into a server to run its wall clock off. Preloaded directly rather than through the
/// `faketime` wrapper, which forks: the server is then the process this run signals, and a
/// SIGTERM drains it instead of killing the wrapper.
fn libfaketime() -> anyhow::Result<PathBuf> {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu/faketime",
        "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib/faketime",
        "/usr/local/lib/faketime",
    ];
    dirs.iter()
        .map(|d| Path::new(d).join("libfaketimeMT.so.1"))
        .find(|p| p.is_file())
        .context(
            "--nemesis clock-skew runs servers under libfaketime, which is not installed \
             (Debian: apt-get install faketime)",
        )
}

/// How long a server may take to answer `/healthz` after its start (migrations included).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to drain after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Postgres connections for all servers together (each gets a share, at least 4).
const POOL_BUDGET: usize = 60;

/// The default binary: `coupon-server` (or `coupon-server-mutants` for a mutant) next to
/// this executable, where a Cargo build puts both.
fn default_binary(variant: Variant) -> anyhow::Result<PathBuf> {
    let name = if variant == Variant::Correct {
        "coupon-server"
    } else {
        "coupon-server-mutants"
    };
    let exe = std::env::current_exe().context("locating coupon-loadtest")?;
    let dir = exe.parent().context("coupon-loadtest has no directory")?;
    // `cargo test` runs from deps/; the binaries are one level up.
    let candidates = [dir.join(name), dir.join("..").join(name)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "no {name} next to coupon-loadtest ({}); build it (cargo build --workspace \
                 --bins) or give --server-bin / COUPON_SERVER_BIN",
                dir.display()
            )
        })
}

/// The last lines of a server's log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl Fleet {
    /// Starts `spec.count` servers and waits until each answers `/healthz`.
    pub(crate) async fn start(spec: FleetSpec) -> anyhow::Result<Self> {
        let binary = match spec.binary {
            Some(b) => b,
            None => default_binary(spec.variant)?,
        };
        let logs = tempfile::tempdir().context("creating a directory for the server logs")?;
        let pool = (POOL_BUDGET / spec.count.max(1)).clamp(4, 20);
        let mut fleet = Self {
            processes: Vec::with_capacity(spec.count),
            binary,
            logs,
        };
        for i in 0..spec.count {
            let port = free_port().context("finding a free port")?;
            let log = fleet.logs.path().join(format!("server-{i}.log"));
            let skew = spec
                .skews
                .iter()
                .find(|(at, _)| *at == i)
                .map(|(_, offset)| offset.clone());
            let faketime = match skew {
                Some(_) => Some(libfaketime()?),
                None => None,
            };
            let (binary, redis, database_url) = (
                fleet.binary.clone(),
                spec.redis.clone(),
                spec.database_url_of
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map_or_else(|| spec.database_url.clone(), |(_, url)| url.clone()),
            );
            let (namespace, admin, secret, service) = (
                spec.namespace.clone(),
                spec.admin_token.clone(),
                spec.user_secret.clone(),
                spec.service_token.clone(),
            );
            let (persistence, variant, log_path) = (spec.persistence, spec.variant, log.clone());
            let command = move || -> anyhow::Result<Command> {
                let out = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log_path)
                    .context("opening a server log")?;
                let err = out.try_clone().context("sharing the server log")?;
                let mut cmd = Command::new(&binary);
                if let (Some(lib), Some(offset)) = (&faketime, &skew) {
                    // The wall clock only: Tokio's timers read the monotonic clock.
                    cmd.env("LD_PRELOAD", lib)
                        .env("FAKETIME", offset)
                        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
                }
                cmd.env("COUPON_LISTEN", format!("127.0.0.1:{port}"))
                    .env("COUPON_REDIS_URL", redis.first_url())
                    .env("COUPON_DATABASE_URL", &database_url)
                    .env("COUPON_REDIS_NAMESPACE", &namespace)
                    .env("COUPON_ADMIN_TOKEN", &admin)
                    .env("COUPON_USER_TOKEN_SECRET", &secret)
                    .env("COUPON_PERSISTENCE", persistence)
                    .env("COUPON_DB_POOL_SIZE", pool.to_string())
                    .env("COUPON_SERVICE_TOKEN", &service)
                    .env("RUST_LOG", "warn")
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err)
                    .kill_on_drop(true);
                match &redis {
                    RedisTarget::Cluster(nodes) => {
                        cmd.env("COUPON_REDIS_CLUSTER_NODES", nodes.join(","));
                    }
                    RedisTarget::Node(_) => {
                        cmd.env_remove("COUPON_REDIS_CLUSTER_NODES");
                    }
                }
                if variant != Variant::Correct {
                    cmd.arg("--mutant").arg(variant.name());
                }
                Ok(cmd)
            };
            let child = command()?
                .spawn()
                .with_context(|| format!("starting {}", fleet.binary.display()))?;
            fleet.processes.push(Process {
                child,
                url: format!("http://127.0.0.1:{port}"),
                log,
                command: std::sync::Arc::new(command),
            });
        }
        for i in 0..fleet.processes.len() {
            fleet.wait_healthy(i).await?;
        }
        Ok(fleet)
    }

    async fn wait_healthy(&mut self, i: usize) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let p = &mut self.processes[i];
        loop {
            if let Some(status) = p.child.try_wait().context("watching a server")? {
                bail!(
                    "server {i} ({}) exited at start ({status}); its log:\n{}",
                    self.binary.display(),
                    tail(&p.log)
                );
            }
            let health = http.get(format!("{}/healthz", p.url)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "server {i} on {} not healthy within {START_TIMEOUT:?}; its log:\n{}",
                    p.url,
                    tail(&p.log)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILLs server `i` (no drain: whatever it had in flight, batches included, is cut
    /// off), then waits for it to be gone.
    pub(crate) async fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        let p = self.processes.get_mut(i).context("no such server")?;
        p.child.kill().await.context("SIGKILL of a server")
    }

    /// Starts server `i` again, on its port and settings, and waits until it is healthy.
    pub(crate) async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let p = self.processes.get_mut(i).context("no such server")?;
        p.child = (p.command)()?
            .spawn()
            .with_context(|| format!("restarting {}", self.binary.display()))?;
        self.wait_healthy(i).await
    }

    /// The servers' base URLs, in order.
    pub(crate) fn base_urls(&self) -> Vec<String> {
        self.processes.iter().map(|p| p.url.clone()).collect()
    }

    /// Each server's peak resident memory so far, MiB (None where unreadable).
    pub(crate) fn peak_rss_mib(&self) -> Vec<Option<f64>> {
        self.processes
            .iter()
            .map(|p| {
                p.child
                    .id()
                    .and_then(|pid| crate::memory::peak_rss_mib_of(&pid.to_string()))
            })
            .collect()
    }

    /// The binary's file name, for the report.
    pub(crate) fn binary_name(&self) -> String {
        self.binary
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }

    /// SIGTERM to every server (they drain), then waits; a server that does not stop in
    /// time is killed and reported.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        for p in &self.processes {
            if let Some(pid) = p.child.id() {
                // kill(1) rather than a signal crate: the workspace forbids unsafe code.
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
        }
        let mut problems = Vec::new();
        for (i, p) in self.processes.iter_mut().enumerate() {
            match tokio::time::timeout(STOP_TIMEOUT, p.child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => problems.push(format!(
                    "server {i} exited {status}; its log:\n{}",
                    tail(&p.log)
                )),
                Ok(Err(e)) => problems.push(format!("server {i}: {e}")),
                Err(_) => {
                    let _ = p.child.kill().await;
                    problems.push(format!("server {i} did not stop within {STOP_TIMEOUT:?}"));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            bail!("{}", problems.join("\n"))
        }
    }
}
