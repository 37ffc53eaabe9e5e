//! Histories of any size for the checker's tests and benchmark: a real compare-and-set
//! register stepped by simulated concurrent clients, written as Knossos EDN (the
//! `cas-register` format), as Jepsen's register workloads make them — values 0–4, reads,
//! writes and compare-and-sets, a share of operations crashed (`:info`, the process then
//! replaced by a new one, as Jepsen does).
//!
//! Each operation takes effect at one moment strictly between its invoke and its completion,
//! on one register: a history made without a planted violation is linearizable by
//! construction. A planted violation makes it certainly not.

use std::fmt::Write as _;

/// A known violation planted about two thirds of the way in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// A read returns a value no operation ever writes.
    ImpossibleRead,
    /// Once every client is idle: `write x`, then `write y`, each completed alone, then a
    /// read alone returns `x` — a value certainly overwritten (and no crashed operation
    /// wrote `x`).
    StaleRead,
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegisterHistory {
    /// Client operations invoked.
    pub ops: usize,
    /// Clients with an operation in flight at once (at most).
    pub processes: usize,
    /// Share of operations whose client crashes (`:info`), 0.0–1.0.
    pub crash_rate: f64,
    /// The violation to plant, if any.
    pub planted: Option<Planted>,
    /// Seed: the same seed makes the same history.
    pub seed: u64,
}

/// Values written: 0–4, as Jepsen's register workloads.
const VALUES: u64 = 5;
/// The value an impossible read returns: never written.
const NEVER_WRITTEN: i64 = 99;

/// SplitMix64: a seedable generator a few lines long, so that a history is reproduced from
/// its seed alone and this crate needs no random-number dependency for it.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Write(i64),
    Cas(i64, i64),
}

/// What an operation that took effect returned: a read's value, nothing, or a failed
/// compare-and-set.
type Effect = Result<Option<i64>, ()>;

/// One client: its current process id, and its operation in flight with its result once it
/// took effect.
struct Client {
    process: u64,
    op: Option<(Op, Option<Effect>)>,
}

struct Writer {
    out: String,
    /// Values written by crashed operations: they may take effect at any later time, so a
    /// read of one is never certainly stale.
    crashed_writes: [bool; VALUES as usize],
}

impl Writer {
    fn event(&mut self, process: u64, kind: &str, op: Op, value: Option<String>) {
        let (f, invoked) = match op {
            Op::Read => ("read", "nil".to_owned()),
            Op::Write(v) => ("write", v.to_string()),
            Op::Cas(from, to) => ("cas", format!("[{from} {to}]")),
        };
        let value = value.unwrap_or(invoked);
        let _ = writeln!(
            self.out,
            "{{:process {process}, :type :{kind}, :f :{f}, :value {value}}}"
        );
    }
}

impl RegisterHistory {
    /// The history as Knossos EDN text (initial value 0, as Knossos's `cas-register`).
    pub fn edn(&self) -> String {
        let mut rng = SplitMix(self.seed);
        let processes = self.processes.max(1);
        let mut clients: Vec<Client> = (0..processes as u64)
            .map(|process| Client { process, op: None })
            .collect();
        let mut register = 0i64;
        let mut w = Writer {
            out: String::from("[\n"),
            crashed_writes: [false; VALUES as usize],
        };
        let mut invoked = 0usize;
        let plant_at = self.ops * 2 / 3;
        let mut planted = self.planted.is_none();
        while invoked < self.ops || clients.iter().any(|c| c.op.is_some()) {
            if !planted && invoked >= plant_at {
                planted = self.plant(&mut clients, &mut register, &mut w, &mut rng);
                if planted {
                    invoked += 2;
                }
                continue;
            }
            let c = rng.below(processes as u64) as usize;
            let client = &mut clients[c];
            match client.op {
                None if invoked < self.ops => {
                    let op = match rng.below(10) {
                        0..=4 => Op::Read,
                        5..=7 => Op::Write(rng.below(VALUES) as i64),
                        _ => Op::Cas(rng.below(VALUES) as i64, rng.below(VALUES) as i64),
                    };
                    w.event(client.process, "invoke", op, None);
                    client.op = Some((op, None));
                    invoked += 1;
                }
                None => {}
                Some((op, None)) => {
                    let result = apply(op, &mut register);
                    client.op = Some((op, Some(result)));
                }
                Some((op, Some(result))) => {
                    if rng.chance(self.crash_rate) {
                        if let Op::Write(v) | Op::Cas(_, v) = op {
                            w.crashed_writes[v as usize] = true;
                        }
                        w.event(client.process, "info", op, None);
                        client.process += processes as u64;
                    } else {
                        complete(&mut w, client.process, op, result);
                    }
                    client.op = None;
                }
            }
        }
        w.out.push_str("]\n");
        w.out
    }

    /// Plants the violation once every client is idle; false while some are not (they are
    /// then stepped towards completion instead).
    fn plant(
        &self,
        clients: &mut [Client],
        register: &mut i64,
        w: &mut Writer,
        rng: &mut SplitMix,
    ) -> bool {
        if let Some(busy) = clients.iter_mut().find(|c| c.op.is_some()) {
            match busy.op {
                Some((op, None)) => busy.op = Some((op, Some(apply(op, register)))),
                Some((op, Some(result))) => {
                    complete(w, busy.process, op, result);
                    busy.op = None;
                }
                None => {}
            }
            return false;
        }
        let p = clients[rng.below(clients.len() as u64) as usize].process;
        match self.planted {
            Some(Planted::StaleRead) => {
                // A value no crashed operation wrote (else that write could explain the
                // read), outside 0–4 if every one has been.
                let x = (0..VALUES as i64)
                    .find(|&v| !w.crashed_writes[v as usize])
                    .unwrap_or(NEVER_WRITTEN - 1);
                let y = (x + 1 + rng.below(VALUES - 1) as i64).rem_euclid(VALUES as i64);
                for v in [x, y] {
                    w.event(p, "invoke", Op::Write(v), None);
                    w.event(p, "ok", Op::Write(v), None);
                }
                *register = y;
                w.event(p, "invoke", Op::Read, None);
                w.event(p, "ok", Op::Read, Some(x.to_string()));
            }
            _ => {
                w.event(p, "invoke", Op::Write(*register), None);
                w.event(p, "ok", Op::Write(*register), None);
                w.event(p, "invoke", Op::Read, None);
                w.event(p, "ok", Op::Read, Some(NEVER_WRITTEN.to_string()));
            }
        }
        true
    }
}

fn apply(op: Op, register: &mut i64) -> Effect {
    match op {
        Op::Read => Ok(Some(*register)),
        Op::Write(v) => {
            *register = v;
            Ok(None)
        }
        Op::Cas(from, to) if *register == from => {
            *register = to;
            Ok(None)
        }
        Op::Cas(..) => Err(()),
    }
}

fn complete(w: &mut Writer, process: u64, op: Op, result: Effect) {
    match result {
        Ok(Some(read)) => w.event(process, "ok", op, Some(read.to_string())),
        Ok(None) => w.event(process, "ok", op, None),
        Err(()) => w.event(process, "fail", op, None),
    }
}
