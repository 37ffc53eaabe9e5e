//! Where a row's CPU goes: the CPU time of the bench's server threads, of its client threads
//! (everything else in this process: the minimal client, Goose), of every Postgres process
//! and of every Redis process, per operation, read from `/proc` before and after the row.
//!
//! Throughput on a shared 2-core machine moves with whatever else runs; CPU per operation
//! hardly does, and it says which part to make cheaper. It is a whole-machine reading:
//! Postgres and Redis processes serving anything else during the row are counted too.
//! Linux only; elsewhere the columns say "—".

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
}

/// CPU microseconds per operation of each part over one row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct PerOp {
    pub server_us: f64,
    pub client_us: f64,
    pub postgres_us: f64,
    pub redis_us: f64,
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
    Some(s)
}

impl Snapshot {
    /// CPU per operation between `self` and `later`, over `ops` operations.
    pub(crate) fn per_op(&self, later: &Snapshot, ops: usize) -> Option<PerOp> {
        if ops == 0 {
            return None;
        }
        let us = |a: u64, b: u64| b.saturating_sub(a) as f64 / TICKS_PER_SEC * 1e6 / ops as f64;
        Some(PerOp {
            server_us: us(self.server, later.server),
            client_us: us(self.client, later.client),
            postgres_us: us(self.postgres, later.postgres),
            redis_us: us(self.redis, later.redis),
        })
    }
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
        };
        let b = Snapshot {
            server: 300,
            client: 150,
            postgres: 410,
            redis: 20,
        };
        let p = a.per_op(&b, 10_000).expect("ops > 0");
        assert_eq!(p.server_us, 200.0);
        assert_eq!(p.client_us, 100.0);
        assert_eq!(p.postgres_us, 400.0);
        assert_eq!(p.redis_us, 20.0);
        assert_eq!(p.total_us(), 720.0);
        assert!(a.per_op(&b, 0).is_none());
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
    }
}
