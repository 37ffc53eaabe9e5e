//! Where a row's CPU goes: the CPU time of the bench's server threads, of its client threads
//! (everything else in this process: the minimal client, Goose), of every Postgres process
//! and of every Redis process, per operation, read from `/proc` before and after the row.
//!
//! Throughput on a shared 2-core machine moves with whatever else runs; CPU per operation
//! hardly does, and it says which part to make cheaper. It is a whole-machine reading:
//! Postgres and Redis processes serving anything else during the row are counted too.
//!
//! Beside it, how busy the whole machine was over the row (`/proc/stat`, all cores): a row
//! well under 100% waited (on a flush, a lock, a round trip) rather than ran out of CPU, so
//! cheaper parts would not make it faster; and the share the hypervisor took (steal), which
//! says when a slow round was the host's doing. Linux only; elsewhere the columns say "—".

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The name of the server runtime's threads (and its own thread's prefix): see `target.rs`.
pub(crate) const SERVER_THREADS: &str = "bench-server";

/// `/proc` reports CPU time in USER_HZ ticks, fixed at 100 per second by the Linux ABI.
const TICKS_PER_SEC: f64 = 100.0;

/// Cumulative CPU ticks of each part at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Snapshot {
    server: u64,
    client: u64,
    postgres: u64,
    redis: u64,
    machine: Option<MachineTicks>,
}

/// Cumulative ticks of all cores together, from `/proc/stat`'s `cpu` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct MachineTicks {
    /// user + nice + system + irq + softirq (guest time is inside user already).
    busy: u64,
    /// idle + iowait: nothing to run.
    idle: u64,
    /// Taken by the hypervisor for other guests while this one had work.
    steal: u64,
}

/// CPU microseconds per operation of each part over one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct PerOp {
    pub server_us: f64,
    pub client_us: f64,
    pub postgres_us: f64,
    pub redis_us: f64,
    /// Percent of all the machine's cores busy over the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_busy_pct: Option<f64>,
    /// Percent of all the machine's core time stolen by the hypervisor over the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
}

impl PerOp {
    /// All parts together.
    pub(crate) fn total_us(&self) -> f64 {
        self.server_us + self.client_us + self.postgres_us + self.redis_us
    }
}

/// Reads every part's ticks now; None where `/proc` is not there.
pub(crate) fn snapshot() -> Option<Snapshot> {
    let mut s = Snapshot::default();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Some(t) = read_stat(&task.path().join("stat")) {
            if t.comm.starts_with(SERVER_THREADS) {
                s.server += t.own;
            } else {
                s.client += t.own;
            }
        }
    }
    // A tool this process ran and waited for (pgbench, redis-benchmark) is the client of
    // an anchor row.
    s.client += read_stat(Path::new("/proc/self/stat"))?.children;
    for proc in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = proc.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match read_stat(&proc.path().join("stat")) {
            // A backend that exited (a pgbench connection) is in its postmaster's children.
            Some(t) if t.comm == "postgres" => s.postgres += t.own + t.children,
            Some(t) if t.comm == "redis-server" => s.redis += t.own,
            _ => {}
        }
    }
    s.machine = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| parse_machine(&text));
    Some(s)
}

fn parse_machine(text: &str) -> Option<MachineTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest, guest_nice: inside user, nice).
    let at = |i: usize| f.get(i).copied();
    Some(MachineTicks {
        busy: at(0)? + at(1)? + at(2)? + at(5)? + at(6)?,
        idle: at(3)? + at(4)?,
        steal: at(7).unwrap_or(0),
    })
}

impl Snapshot {
    /// CPU per operation between `self` and `later`, over `ops` operations.
    pub(crate) fn per_op(&self, later: &Snapshot, ops: usize) -> Option<PerOp> {
        if ops == 0 {
            return None;
        }
        let us = |a: u64, b: u64| b.saturating_sub(a) as f64 / TICKS_PER_SEC * 1e6 / ops as f64;
        let (machine_busy_pct, steal_pct) = match (self.machine, later.machine) {
            (Some(a), Some(b)) => shares(a, b),
            _ => (None, None),
        };
        Some(PerOp {
            server_us: us(self.server, later.server),
            client_us: us(self.client, later.client),
            postgres_us: us(self.postgres, later.postgres),
            redis_us: us(self.redis, later.redis),
            machine_busy_pct,
            steal_pct,
        })
    }
}

/// Busy and stolen percent of all core time between two readings; None for no time.
fn shares(a: MachineTicks, b: MachineTicks) -> (Option<f64>, Option<f64>) {
    let busy = b.busy.saturating_sub(a.busy) as f64;
    let idle = b.idle.saturating_sub(a.idle) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    let all = busy + idle + steal;
    if all == 0.0 {
        return (None, None);
    }
    (Some(100.0 * busy / all), Some(100.0 * steal / all))
}

/// One `/proc/.../stat` line: the command name, its own CPU ticks (utime + stime) and
/// those of its exited, waited-for children (cutime + cstime).
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    comm: String,
    own: u64,
    children: u64,
}

fn read_stat(path: &Path) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may itself hold spaces or parentheses: the
    // fields after it start at the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name, fields of stat(5) from 3 (state): utime is 14, stime 15, cutime 16,
    // cstime 17.
    let field = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(Stat {
        comm,
        own: field(14)? + field(15)?,
        children: field(16)? + field(17)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (tokio (w) 1) S 1 2 3 4 5 6 7 8 9 10 250 75 4 6 20 0 9 0 100 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                comm: "tokio (w) 1".into(),
                own: 325,
                children: 10
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn per_op_divides_the_difference() {
        let a = Snapshot {
            server: 100,
            client: 50,
            postgres: 10,
            redis: 0,
            machine: Some(MachineTicks {
                busy: 1_000,
                idle: 500,
                steal: 0,
            }),
        };
        let b = Snapshot {
            server: 300,
            client: 150,
            postgres: 410,
            redis: 20,
            machine: Some(MachineTicks {
                busy: 1_700,
                idle: 700,
                steal: 100,
            }),
        };
        let p = a.per_op(&b, 10_000).expect("ops > 0");
        assert_eq!(p.server_us, 200.0);
        assert_eq!(p.client_us, 100.0);
        assert_eq!(p.postgres_us, 400.0);
        assert_eq!(p.redis_us, 20.0);
        assert_eq!(p.total_us(), 720.0);
        assert_eq!(p.machine_busy_pct, Some(70.0));
        assert_eq!(p.steal_pct, Some(10.0));
        assert!(a.per_op(&b, 0).is_none());
        let unread = Snapshot { machine: None, ..b };
        assert_eq!(
            a.per_op(&unread, 10).map(|p| p.machine_busy_pct),
            Some(None)
        );
    }

    #[test]
    fn the_machine_line_of_proc_stat_parses() {
        let text = "cpu  246558 10 40720 105232 3212 0 9071 835 0 0\n\
                    cpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n";
        assert_eq!(
            parse_machine(text),
            Some(MachineTicks {
                busy: 246_558 + 10 + 40_720 + 9_071,
                idle: 105_232 + 3_212,
                steal: 835,
            })
        );
        // Kernels before 2.6.11 have no steal column.
        assert_eq!(
            parse_machine("cpu 1 2 3 4 5 6 7\n").map(|m| m.steal),
            Some(0)
        );
        assert_eq!(parse_machine("intr 1 2\n"), None);
        assert_eq!(parse_machine("cpu 1 2\n"), None);
    }

    #[test]
    fn this_process_is_found() {
        let s = snapshot().expect("/proc on Linux");
        // Burn a little CPU so the reading cannot stay zero.
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let later = snapshot().expect("/proc on Linux");
        assert!(later.client > s.client, "client ticks did not grow");
        let p = s.per_op(&later, 1).expect("one operation");
        let busy = p.machine_busy_pct.expect("/proc/stat on Linux");
        assert!(busy > 0.0 && busy <= 100.0, "machine busy {busy}%");
    }
}
