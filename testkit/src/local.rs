//! Way 3 of provisioning (docs/ARCHITECTURE.md, "Provisioning"): `redis-server` and
//! `initdb`/`pg_ctl` from this machine, started on free loopback ports in a temp dir and
//! stopped on drop (or when the owning process exits, for instances kept in a process-wide
//! static).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::host::find_binary;
pub use crate::host::{free_port, free_ports};
pub use crate::redis_server::{LocalRedis, RedisPersistence};
use crate::{ProvisionError, process::Watchdog};

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A Postgres cluster this process created with `initdb` and started with `pg_ctl`; stopped
/// on drop. As root it runs as the `postgres` user (Postgres refuses to run as root).
#[derive(Debug)]
pub struct LocalPostgres {
    pg_ctl: PathBuf,
    data: PathBuf,
    port: u16,
    as_postgres: bool,
    opts: String,
    dir: tempfile::TempDir,
    // Stops the cluster if this process ends without dropping it (a process-wide static);
    // disarmed on drop, after `drop` has stopped it.
    _watchdog: Watchdog,
}

impl LocalPostgres {
    /// Creates and starts a throwaway cluster on a free loopback port (trust auth).
    pub fn start() -> Result<Self, ProvisionError> {
        Self::start_with(&[])
    }

    /// [`Self::start`] with `fsync=on`: every commit waits for its WAL flush, as in a
    /// Postgres as shipped (for measurements of commits; tests need no flush).
    pub fn start_durable() -> Result<Self, ProvisionError> {
        Self::start_with(&["fsync=on"])
    }

    /// [`Self::start`] with extra server settings (`name=value`, as `postgres -c` takes;
    /// a later setting of the same name wins, so `fsync=on` overrides the default).
    pub fn start_with(settings: &[&str]) -> Result<Self, ProvisionError> {
        let initdb = find_binary("initdb").ok_or_else(|| {
            ProvisionError::Local("initdb not found in PATH or /usr/lib/postgresql/*/bin".into())
        })?;
        let (dir, data, as_postgres) = owned_dir()?;
        run(
            pg_command(as_postgres, &initdb).arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        )?;
        Self::launch(dir, data, as_postgres, settings)
    }

    /// A streaming standby of the primary listening on `primary` (`host:port`, which may be
    /// a fault proxy in front of it, so that a test can hold the replication link): a base
    /// backup taken with `pg_basebackup -R` (it writes `standby.signal` and the
    /// `primary_conninfo` that streams from `primary`), started on a free port as a hot
    /// standby. It replicates asynchronously unless the primary names it in
    /// `synchronous_standby_names` (its application name is `walreceiver`).
    pub fn start_standby(primary: &str, settings: &[&str]) -> Result<Self, ProvisionError> {
        let basebackup = find_binary("pg_basebackup")
            .ok_or_else(|| ProvisionError::Local("pg_basebackup not found".into()))?;
        let (host, port) = primary
            .rsplit_once(':')
            .ok_or_else(|| ProvisionError::Local(format!("no host:port in {primary}")))?;
        let (dir, data, as_postgres) = owned_dir()?;
        run(
            pg_command(as_postgres, &basebackup)
                .args(["-h", host, "-p", port, "-U", "postgres", "-D"])
                .arg(&data)
                .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]),
            "pg_basebackup",
        )?;
        Self::launch(dir, data, as_postgres, settings)
    }

    /// Starts a server on `data` (made by `initdb` or `pg_basebackup`) on a free port.
    fn launch(
        dir: tempfile::TempDir,
        data: PathBuf,
        as_postgres: bool,
        settings: &[&str],
    ) -> Result<Self, ProvisionError> {
        let pg_ctl = find_binary("pg_ctl")
            .ok_or_else(|| ProvisionError::Local("pg_ctl not found".into()))?;
        let port = free_port()?;
        let mut opts = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            dir.path().display()
        );
        for setting in settings {
            opts.push_str(" -c ");
            opts.push_str(setting);
        }
        let stop = format!(
            "{} {} -D {} -m immediate stop",
            if as_postgres {
                "runuser -u postgres --"
            } else {
                ""
            },
            pg_ctl.display(),
            data.display()
        );
        let watchdog = Watchdog::arm(&stop)?;
        let pg = Self {
            pg_ctl,
            data,
            port,
            as_postgres,
            opts,
            dir,
            _watchdog: watchdog,
        };
        pg.pg_ctl_start()?;
        Ok(pg)
    }

    /// `host:port` it listens on.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the server at once (immediate shutdown, as a crashed machine): whatever its
    /// standbys had not received is gone with it.
    pub fn stop_immediate(&self) -> Result<(), ProvisionError> {
        run(
            pg_command(self.as_postgres, &self.pg_ctl)
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "stop"]),
            "pg_ctl stop -m immediate",
        )
    }

    /// Promotes a standby to primary (`pg_ctl promote`, waiting until it accepts writes): it
    /// ends recovery on a new timeline.
    pub fn promote(&self) -> Result<(), ProvisionError> {
        run(
            pg_command(self.as_postgres, &self.pg_ctl)
                .arg("-D")
                .arg(&self.data)
                .args(["-w", "promote"]),
            "pg_ctl promote",
        )
    }

    fn pg_ctl_start(&self) -> Result<(), ProvisionError> {
        run(
            pg_command(self.as_postgres, &self.pg_ctl)
                .arg("-D")
                .arg(&self.data)
                .args(["-o", &self.opts, "-w", "-l"])
                .arg(self.dir.path().join("log"))
                .arg("start"),
            "pg_ctl start",
        )
    }

    /// Crashes the server (immediate shutdown: every process quits at once, nothing is
    /// flushed, as after a kill -9 of the postmaster) and starts it again on the same data
    /// and port; it comes back through crash recovery.
    pub fn crash_and_restart(&self) -> Result<(), ProvisionError> {
        self.stop_immediate()?;
        self.pg_ctl_start()
    }

    /// URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// SIGSTOPs the postmaster and every backend: a frozen VM, a stalled disk. Connections
    /// stay open and nothing answers, as in a grey failure; [`Self::resume`] undoes it.
    pub fn pause(&self) -> Result<(), ProvisionError> {
        self.signal_all("STOP")
    }

    /// SIGCONTs what [`Self::pause`] stopped.
    pub fn resume(&self) -> Result<(), ProvisionError> {
        self.signal_all("CONT")
    }

    /// `sig` to the postmaster and its children: stopping, the postmaster first (so it forks
    /// no backend the signal would miss); resuming, the backends first.
    fn signal_all(&self, sig: &str) -> Result<(), ProvisionError> {
        let pid_file = self.data.join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .map_err(|e| ProvisionError::Local(format!("{}: {e}", pid_file.display())))?;
        let pid = text
            .lines()
            .next()
            .map(str::trim)
            .filter(|p| p.parse::<u32>().is_ok())
            .ok_or_else(|| ProvisionError::Local(format!("no pid in {}", pid_file.display())))?
            .to_owned();
        let children = || {
            // pkill exits 1 when no child matched: not an error.
            let _ = Command::new("pkill")
                .args([&format!("-{sig}"), "-P", &pid])
                .status();
        };
        if sig == "CONT" {
            children();
        }
        run(
            Command::new("kill").args([&format!("-{sig}"), &pid]),
            "kill (postmaster)",
        )?;
        if sig != "CONT" {
            children();
        }
        Ok(())
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        let _ = pg_command(self.as_postgres, &self.pg_ctl)
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A temp dir for a cluster's data, owned by the `postgres` user when running as root
/// (Postgres refuses to run as root): the dir, its `data` path, and whether to run as
/// `postgres`.
fn owned_dir() -> Result<(tempfile::TempDir, PathBuf, bool), ProvisionError> {
    let dir = tempfile::tempdir().map_err(|e| ProvisionError::Local(e.to_string()))?;
    let data = dir.path().join("data");
    let as_postgres = running_as_root();
    if as_postgres {
        run(
            Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path()),
            "chown",
        )?;
    }
    Ok((dir, data, as_postgres))
}

fn pg_command(as_postgres: bool, bin: &Path) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), ProvisionError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ProvisionError::Local(format!("{what}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ProvisionError::Local(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
