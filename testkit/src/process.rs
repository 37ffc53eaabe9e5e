//! Server processes this process started, and the watchdogs that stop them if this process
//! dies first.
//!
//! A signal goes only to a child not yet reaped: once reaped, its pid is free, and with a
//! `pid_max` of 32,768 and test runs that fork thousands of processes, the kernel soon hands
//! it to someone else. A watchdog that later killed "pid N" once killed a test binary of the
//! next suite. So a watchdog is disarmed when its server is stopped here, fires on this
//! process's exit rather than by polling, and checks the pid still names the same process
//! (its start time in `/proc`) before killing it.

use std::{
    io::Write,
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
};

use crate::ProvisionError;

/// A `sh` that runs a cleanup command when this process is gone: it blocks reading a pipe
/// only this process can write to, and the kernel closes that pipe however this process
/// ends (even by SIGKILL). Dropping it disarms it: a line on the pipe makes `sh` exit
/// without cleaning up.
#[derive(Debug)]
pub(crate) struct Watchdog {
    sh: Child,
    pipe: Option<ChildStdin>,
}

impl Watchdog {
    pub(crate) fn arm(cleanup: &str) -> Result<Self, ProvisionError> {
        let script = format!("if read _; then exit 0; fi; {cleanup} >/dev/null 2>&1");
        let mut sh = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ProvisionError::local(format!("watchdog sh: {e}")))?;
        let pipe = sh.stdin.take();
        Ok(Self { sh, pipe })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(b"disarm\n");
        }
        let _ = self.sh.wait();
    }
}

/// A long-running child (a `redis-server`), SIGKILLed on drop, with a watchdog for the case
/// this process dies without dropping it (servers kept in a process-wide static).
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    reaped: bool,
    watchdog: Option<Watchdog>,
}

impl ServerProcess {
    pub(crate) fn spawn(cmd: &mut Command, what: &str) -> Result<Self, ProvisionError> {
        let mut child = cmd
            .spawn()
            .map_err(|e| ProvisionError::local(format!("{what}: {e}")))?;
        let pid = child.id();
        let cleanup = match start_time(pid) {
            Some(t) => kill_if_still(pid, &t),
            None => format!("kill -9 {pid}"),
        };
        let watchdog = match Watchdog::arm(&cleanup) {
            Ok(w) => w,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Self {
            child,
            reaped: false,
            watchdog: Some(watchdog),
        })
    }

    /// Its pid while it is this process's child (None once reaped).
    pub(crate) fn id(&self) -> Option<u32> {
        (!self.reaped).then(|| self.child.id())
    }

    /// Sends a signal by name (`STOP`, `CONT`, `KILL`) with kill(1).
    pub(crate) fn signal(&self, sig: &str) -> Result<(), ProvisionError> {
        let pid = self
            .id()
            .ok_or_else(|| ProvisionError::local(format!("kill -{sig}: the process has ended")))?;
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            Ok(())
        } else {
            Err(ProvisionError::local(format!("kill -{sig} {pid} failed")))
        }
    }

    /// SIGKILLs and reaps it, and disarms its watchdog.
    pub(crate) fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
        self.watchdog = None;
    }

    /// How it ended, if it has (reaping it).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.reaped {
            return None;
        }
        let status = self.child.try_wait().ok().flatten();
        if status.is_some() {
            self.reaped = true;
            self.watchdog = None;
        }
        status
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A shell command that SIGKILLs `pid` only while it is still the process that started at
/// `start` (field 22 of `/proc/<pid>/stat`): a later process given the same pid has
/// another start time and is left alone.
pub fn kill_if_still(pid: u32, start: &str) -> String {
    format!(
        "s=$(cat /proc/{pid}/stat) && s=${{s##*) }} && set -- $s && [ \"${{20}}\" = {start} ] && kill -9 {pid}"
    )
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
pub fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its `)` do not.
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(19).map(str::to_owned)
}
