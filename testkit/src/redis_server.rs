//! A `redis-server` of this process's own, for faults that must never touch a shared one:
//! kill, pause, and the restarts that make Redis lie — from an older RDB snapshot, or from an
//! AOF that lost its last second (docs/ARCHITECTURE.md, "A Redis that lies").

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use crate::{
    ProvisionError,
    host::{find_binary, free_port, wait_for_port},
    process::ServerProcess,
};

/// What the server keeps on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisPersistence {
    /// Nothing (a restart comes back empty).
    None,
    /// AOF with `appendfsync everysec` (the common production setting); `SAVE` also works.
    Aof,
}

/// A `redis-server` this process started on a free loopback port; killed on drop.
#[derive(Debug)]
pub struct LocalRedis {
    child: ServerProcess,
    port: u16,
    dir: tempfile::TempDir,
    persistence: RedisPersistence,
}

/// Files of an AOF directory, copied while the server ran.
#[derive(Debug, Clone)]
pub struct AofCopy(Vec<(String, Vec<u8>)>);

impl LocalRedis {
    /// Starts a server with nothing kept on disk.
    pub fn start() -> Result<Self, ProvisionError> {
        Self::start_with(RedisPersistence::None)
    }

    /// Starts a server with the given persistence.
    pub fn start_with(persistence: RedisPersistence) -> Result<Self, ProvisionError> {
        let dir = tempfile::tempdir().map_err(ProvisionError::local)?;
        let port = free_port()?;
        let child = spawn_redis_server(port, dir.path(), persistence, &[])?;
        let redis = Self {
            child,
            port,
            dir,
            persistence,
        };
        wait_for_port(port, Duration::from_secs(10))?;
        Ok(redis)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Kills it and starts a fresh, empty server on the same port.
    pub fn restart(&mut self) -> Result<(), ProvisionError> {
        self.kill();
        self.wipe()?;
        self.start_again(self.persistence)
    }

    /// `SAVE`s now and returns the RDB snapshot (what a restart would load later).
    pub fn snapshot_rdb(&self) -> Result<Vec<u8>, ProvisionError> {
        self.command(&["SAVE"])?;
        std::fs::read(self.dir.path().join("dump.rdb")).map_err(ProvisionError::local)
    }

    /// Kills it and restarts it from `rdb`: every write since the snapshot is gone, but the
    /// keys it had are present (stale), as after a restart from an older snapshot.
    pub fn restart_from_rdb(&mut self, rdb: &[u8]) -> Result<(), ProvisionError> {
        self.kill();
        self.wipe()?;
        std::fs::write(self.dir.path().join("dump.rdb"), rdb).map_err(ProvisionError::local)?;
        // The RDB is only loaded with AOF off; AOF is switched back on once it is loaded.
        self.start_again(RedisPersistence::None)?;
        if self.persistence == RedisPersistence::Aof {
            self.command(&["CONFIG", "SET", "appendonly", "yes"])?;
        }
        Ok(())
    }

    /// Copies the AOF directory as it is on disk now (with `everysec`, up to a second
    /// behind what clients were told).
    pub fn copy_aof(&self) -> Result<AofCopy, ProvisionError> {
        let aof = self.dir.path().join("appendonlydir");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&aof).map_err(ProvisionError::local)? {
            let entry = entry.map_err(ProvisionError::local)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            files.push((
                name,
                std::fs::read(entry.path()).map_err(ProvisionError::local)?,
            ));
        }
        Ok(AofCopy(files))
    }

    /// Kills it and restarts it from an AOF copied earlier (the writes after it are lost).
    pub fn restart_from_aof(&mut self, copy: &AofCopy) -> Result<(), ProvisionError> {
        self.kill();
        self.wipe()?;
        let aof = self.dir.path().join("appendonlydir");
        std::fs::create_dir_all(&aof).map_err(ProvisionError::local)?;
        for (name, bytes) in &copy.0 {
            std::fs::write(aof.join(name), bytes).map_err(ProvisionError::local)?;
        }
        self.start_again(RedisPersistence::Aof)
    }

    /// Sends a signal by name (`STOP`, `CONT`, `KILL`) while it runs.
    pub fn signal(&self, sig: &str) -> Result<(), ProvisionError> {
        self.child.signal(sig)
    }

    fn start_again(&mut self, persistence: RedisPersistence) -> Result<(), ProvisionError> {
        self.child = spawn_redis_server(self.port, self.dir.path(), persistence, &[])?;
        wait_for_port(self.port, Duration::from_secs(10))?;
        // A port that accepts may still be loading its data: wait for PING to answer.
        for _ in 0..500 {
            if self
                .command(&["PING"])
                .is_ok_and(|r| r.starts_with("+PONG"))
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(ProvisionError::Local(
            "restarted redis-server did not answer PING".into(),
        ))
    }

    fn wipe(&self) -> Result<(), ProvisionError> {
        for entry in std::fs::read_dir(self.dir.path()).map_err(ProvisionError::local)? {
            let path = entry.map_err(ProvisionError::local)?.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
        Ok(())
    }

    /// One command over a plain connection (this module stays free of async and of the
    /// redis client); returns the raw first reply line.
    fn command(&self, args: &[&str]) -> Result<String, ProvisionError> {
        let mut conn =
            TcpStream::connect(("127.0.0.1", self.port)).map_err(ProvisionError::local)?;
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(ProvisionError::local)?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        conn.write_all(req.as_bytes())
            .map_err(ProvisionError::local)?;
        let mut buf = [0u8; 512];
        let n = conn.read(&mut buf).map_err(ProvisionError::local)?;
        let reply = String::from_utf8_lossy(&buf[..n]).into_owned();
        if reply.starts_with('-') {
            return Err(ProvisionError::Local(format!(
                "redis {args:?}: {}",
                reply.trim()
            )));
        }
        Ok(reply)
    }
}

/// Starts `redis-server` on 127.0.0.1:`port` with its files in `dir`, then `extra` arguments
/// (a cluster node's); a watchdog kills it if this process dies first.
pub(crate) fn spawn_redis_server(
    port: u16,
    dir: &Path,
    persistence: RedisPersistence,
    extra: &[String],
) -> Result<ServerProcess, ProvisionError> {
    let bin = find_binary("redis-server")
        .ok_or_else(|| ProvisionError::Local("redis-server not found in PATH".into()))?;
    let aof = match persistence {
        RedisPersistence::None => ["--appendonly", "no", "--appendfsync", "everysec"],
        RedisPersistence::Aof => ["--appendonly", "yes", "--appendfsync", "everysec"],
    };
    ServerProcess::spawn(
        Command::new(bin)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            // No automatic snapshots: the nemesis decides when one is taken.
            .args(["--save", ""])
            .args(aof)
            .args(extra)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "redis-server",
    )
}
