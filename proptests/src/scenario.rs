//! Scenarios (docs/ARCHITECTURE.md, "Verification"): templates, concurrent processes each
//! running a sequence of operations, and an optional fault schedule; with the proptest
//! strategies that generate (and shrink) them.

use std::time::Duration;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::op::{CouponRef, Op, Policy, TemplateSpec};

/// The engine's deadline in the property tests: shorter than the default so that a grey
/// fault (which lasts past it) keeps a case short; the liveness check (I9) holds every
/// operation to it plus [`LIVENESS_MARGIN`].
pub const CASE_DEADLINE: Duration = Duration::from_secs(2);
/// What scheduling on a busy machine may add to the deadline before an answer is late.
pub const LIVENESS_MARGIN: Duration = Duration::from_secs(1);

/// A fault the nemesis injects while the processes run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// Delete every Redis key of a template (a Redis restart without persistence, for one
    /// template).
    DropTemplateKeys {
        /// Template index.
        template: u32,
    },
    /// `SCRIPT FLUSH` on the case's own Redis.
    ScriptFlush,
    /// `pg_terminate_backend` of every connection to the case's database.
    TerminateBackends,
    /// Fail the next `n` claims between the Redis deduct and the Postgres insert.
    FailClaimAfterRedis {
        /// How many claims fail.
        n: u32,
    },
    /// Hold every claim `ms` between the Redis deduct and the Postgres insert (widens the
    /// race of docs/ARCHITECTURE.md, "Rebuild and fencing", when combined with lost keys).
    DelayClaimAfterRedis {
        /// Delay in milliseconds.
        ms: u64,
    },
    /// Fail the next `n` claims after the Postgres commit (the client sees an error).
    FailClaimAfterPersist {
        /// How many claims fail.
        n: u32,
    },
    /// Fail the next `n` return-to-stock refunds between commit and outbox apply.
    FailRefundAfterCommit {
        /// How many refunds fail.
        n: u32,
    },
    /// Fail the next `n` redemptions between the UPDATE and the use-log INSERT.
    FailRedeemAfterUpdate {
        /// How many redemptions fail.
        n: u32,
    },
    /// SIGKILL the case's Redis, then start an empty one on the same port.
    KillRedis,
    /// SIGSTOP the case's Redis for `ms`, then SIGCONT.
    PauseRedis {
        /// Pause length in milliseconds.
        ms: u64,
    },
    /// `SAVE` an RDB snapshot, let the case run on for `lag_ms`, then SIGKILL the case's
    /// Redis and restart it from that snapshot: its keys come back present but stale.
    StaleRdbRestart {
        /// Writes after the snapshot that the restart loses.
        lag_ms: u64,
        /// Whether the restarted server is given the engine's current scripts, and so gives
        /// no sign of being new (see `nemesis::warm_up`).
        #[serde(default)]
        warm_scripts: bool,
    },
    /// Copy the AOF (`appendfsync everysec`) as it is on disk, let the case run on for
    /// `lag_ms`, then SIGKILL and restart from the copy: the loss of the last second.
    AofLossRestart {
        /// Writes after the copy that the restart loses.
        lag_ms: u64,
        /// Whether the restarted server is given the engine's current scripts, and so gives
        /// no sign of being new (see `nemesis::warm_up`).
        #[serde(default)]
        warm_scripts: bool,
    },
    /// Delete one key of a template, as `maxmemory` eviction would.
    EvictKey {
        /// Template index.
        template: u32,
        /// Which key.
        key: EvictedKey,
    },
    /// Drop a template's keys and make the rebuild that follows die after writing Redis,
    /// before its Postgres commit (client gone, backend terminated, reply timeout).
    AbortRebuild {
        /// Template index.
        template: u32,
    },
    /// On the case's own cluster: SIGKILL the master owning the template's slot; its replica
    /// takes over (writes not yet replicated are lost); the killed node is restarted and
    /// rejoins as a replica.
    KillSlotMaster {
        /// Template index.
        template: u32,
    },
    /// On the case's own cluster: the template's slot is migrating to another master from
    /// before the processes start (half of another sale's keys in the slot moved, the
    /// template's own still on the source) until the fault's time, when the rest moves ten
    /// keys per `MIGRATE` and the slot is handed over. No store goes away: every operation
    /// must get a definite answer (I9).
    MigrateSlot {
        /// Template index.
        template: u32,
    },
    /// On the case's own cluster: the bus of the master owning the template's slot cut off
    /// from its peers for `ms` (their pings to it held, nothing reset; it still reaches them
    /// and serves clients): a partial partition, which the cluster rides out (Redis counts
    /// any packet from a node as a sign of life). The engine must not react to it: no
    /// rebuild without a real change (I14), every invariant held.
    HoldBus {
        /// Template index.
        template: u32,
        /// How long the bus is held, ms.
        ms: u64,
    },
    /// On the case's own cluster: cut the replication of the replica of the template's
    /// master, let the case run on for `lag_ms`, then promote that lagging replica with
    /// `CLUSTER FAILOVER TAKEOVER`: stale but present counters, on another node.
    LaggingTakeover {
        /// Template index.
        template: u32,
        /// Writes the promoted replica misses.
        lag_ms: u64,
        /// Whether the replica is given the engine's current scripts before its promotion,
        /// and so gives no sign of being new (see `nemesis::warm_up`).
        #[serde(default)]
        warm_scripts: bool,
    },
    /// On the case's own Postgres: an immediate shutdown (every process quits at once,
    /// nothing flushed, as after a kill -9 of the postmaster), then a restart through crash
    /// recovery on the same data. Asynchronously committed transactions not yet written out
    /// are lost.
    CrashPostgres,
    /// A Postgres primary of the case's own with a synchronous streaming standby
    /// (`pg_basebackup`), reached through a proxy standing for a VIP: the primary is stopped
    /// immediately, the standby promoted and the VIP moved to it. A commit that waited for
    /// the standby is on it; one that did not may be lost.
    FailOverPostgres,
    /// Grey: the engine's link to the case's own Postgres holds every byte for `ms`, past
    /// the engine's deadline (a partition: nothing closed, nothing reset), then heals.
    BlackholePostgres {
        /// How long the link holds, ms.
        ms: u64,
    },
    /// Grey: the engine's link to the case's own Redis holds every byte for `ms`.
    BlackholeRedis {
        /// How long the link holds, ms.
        ms: u64,
    },
    /// Grey: every chunk between the engine and Postgres is delayed `latency_ms`, for `ms`.
    SlowPostgres {
        /// Added to every chunk, each way, ms.
        latency_ms: u64,
        /// How long the link is slow, ms.
        ms: u64,
    },
    /// Grey: the case's own Postgres SIGSTOPped (postmaster and backends) for `ms`, then
    /// SIGCONTed: a frozen VM, a stalled disk.
    PausePostgres {
        /// How long it is stopped, ms.
        ms: u64,
    },
    /// The case's second engine (a second server on the same stores; every other process
    /// uses it) killed the moment a claim batch of its own is about to be decided — in
    /// flight, its intents pending in Redis — and restarted at once: a SIGKILL mid-batch.
    KillEngine,
    /// Grey: the case's second engine alone cut off from Postgres (its link blackholed) for
    /// `ms` while the first goes on: a partition of one server, the others on the right side.
    PartitionSecondEngine {
        /// How long its link holds, ms.
        ms: u64,
    },
    /// Grey: the link to the case's own Redis limited to `bytes_per_sec` each way, for `ms`.
    ThrottleRedis {
        /// Bytes a second each way.
        bytes_per_sec: u64,
        /// How long the link is throttled, ms.
        ms: u64,
    },
}

/// A template key the eviction fault deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictedKey {
    /// The per-user claimed counts.
    Claimed,
    /// The fencing epoch.
    Epoch,
    /// The recorded outcome of one request id (`r<n>`).
    Req(u32),
}

impl Fault {
    /// True if the fault loses or rolls back Redis state (keys dropped or evicted, a
    /// restart empty or from older data, an aborted rebuild).
    pub fn loses_redis_state(&self) -> bool {
        matches!(
            self,
            Self::DropTemplateKeys { .. }
                | Self::KillRedis
                | Self::StaleRdbRestart { .. }
                | Self::AofLossRestart { .. }
                | Self::EvictKey { .. }
                | Self::AbortRebuild { .. }
                | Self::KillSlotMaster { .. }
                | Self::LaggingTakeover { .. }
                | Self::HoldBus { .. }
        )
    }

    /// True if the fault can leave Redis's counters behind Postgres with no sign the engine
    /// could act on before admitting: an evicted key, an aborted rebuild's unfenced state,
    /// or a restarted or promoted server given the engine's scripts beforehand (it answers
    /// no NOSCRIPT). Postgres refuses what such counters admit wrongly; every other loss
    /// (a restart, a promotion, dropped keys) is noticed before the next admission.
    pub fn stales_redis_without_a_sign(&self) -> bool {
        match self {
            Self::EvictKey { .. } | Self::AbortRebuild { .. } => true,
            Self::StaleRdbRestart { warm_scripts, .. }
            | Self::AofLossRestart { warm_scripts, .. }
            | Self::LaggingTakeover { warm_scripts, .. } => *warm_scripts,
            _ => false,
        }
    }

    /// True if the fault acts on a Postgres of the case's own.
    pub fn needs_own_postgres(&self) -> bool {
        matches!(
            self,
            Self::CrashPostgres
                | Self::BlackholePostgres { .. }
                | Self::SlowPostgres { .. }
                | Self::PausePostgres { .. }
                | Self::PartitionSecondEngine { .. }
        )
    }

    /// True if the fault fails over a replicated Postgres of the case's own.
    pub fn needs_replicated_postgres(&self) -> bool {
        matches!(self, Self::FailOverPostgres)
    }

    /// True if the fault acts on the engine's link to a store (a fault proxy between them).
    pub fn needs_link(&self) -> bool {
        matches!(
            self,
            Self::BlackholePostgres { .. }
                | Self::BlackholeRedis { .. }
                | Self::SlowPostgres { .. }
                | Self::ThrottleRedis { .. }
        )
    }

    /// True if the fault acts on a second engine of the case's.
    pub fn needs_second_engine(&self) -> bool {
        matches!(self, Self::KillEngine | Self::PartitionSecondEngine { .. })
    }

    /// True if the fault acts on a Redis Cluster of the case's own.
    pub fn needs_cluster(&self) -> bool {
        matches!(
            self,
            Self::KillSlotMaster { .. }
                | Self::LaggingTakeover { .. }
                | Self::MigrateSlot { .. }
                | Self::HoldBus { .. }
        )
    }

    /// True if the fault needs the cluster's buses behind fault proxies.
    pub fn needs_bus_proxies(&self) -> bool {
        matches!(self, Self::HoldBus { .. })
    }

    /// True if no store goes away, even for a moment, while the fault lasts: the engine
    /// serves through it, and every operation must get a definite answer.
    pub fn served_through(&self) -> bool {
        matches!(self, Self::MigrateSlot { .. })
    }

    /// True if the fault starts before the processes are released (`nemesis::before_release`).
    pub fn starts_before_release(&self) -> bool {
        matches!(self, Self::MigrateSlot { .. })
    }
}

/// A fault and when it strikes, in ms after the processes are released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedFault {
    /// Delay after the start barrier.
    pub at_ms: u64,
    /// The fault.
    pub fault: Fault,
}

/// One generated test case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// Templates, indexed by their `id`.
    pub templates: Vec<TemplateSpec>,
    /// Each process runs its operations in order; processes run concurrently.
    pub processes: Vec<Vec<Op>>,
    /// The fault schedule (empty: a fault-free case).
    pub faults: Vec<TimedFault>,
}

impl Scenario {
    /// True if the case runs a second engine (a second server) beside the first.
    pub fn has_second_engine(&self) -> bool {
        self.faults.iter().any(|f| f.fault.needs_second_engine())
    }

    /// Total operations.
    pub fn size(&self) -> usize {
        self.processes.iter().map(Vec::len).sum()
    }

    /// True if a fault of the scenario loses or rolls back Redis state.
    pub fn loses_redis_state(&self) -> bool {
        self.faults.iter().any(|f| f.fault.loses_redis_state())
    }
}

const USERS: [&str; 4] = ["u0", "u1", "u2", "u3"];
const ORDERS: [&str; 4] = ["o0", "o1", "o2", "o3"];
/// Request ids are drawn from a small pool so that retries and clashes happen often.
const REQUESTS: u32 = 6;

fn template_spec(id: u32) -> impl Strategy<Value = TemplateSpec> {
    (
        1i64..=20,
        1i64..=3,
        prop_oneof![Just(Policy::ReturnToUser), Just(Policy::ReturnToStock)],
    )
        .prop_map(move |(stock, per_user_limit, policy)| TemplateSpec {
            id,
            stock,
            per_user_limit,
            policy,
        })
}

fn templates() -> impl Strategy<Value = Vec<TemplateSpec>> {
    prop_oneof![
        template_spec(0).prop_map(|t| vec![t]),
        (template_spec(0), template_spec(1)).prop_map(|(a, b)| vec![a, b]),
    ]
}

fn op(templates: u32) -> impl Strategy<Value = Op> {
    let user = prop::sample::select(&USERS[..]).prop_map(str::to_owned);
    let order = prop::sample::select(&ORDERS[..]).prop_map(str::to_owned);
    let rid = (0..REQUESTS).prop_map(|r| format!("r{r}"));
    let coupon = (0..templates, rid.clone()).prop_map(|(template, request_id)| CouponRef {
        template,
        request_id,
    });
    prop_oneof![
        4 => (0..templates, user.clone(), rid)
            .prop_map(|(template, user, request_id)| Op::Claim { template, user, request_id }),
        3 => (coupon.clone(), user.clone(), order.clone())
            .prop_map(|(coupon, user, order_id)| Op::Redeem { coupon, user, order_id }),
        2 => (coupon.clone(), user.clone(), order.clone())
            .prop_map(|(coupon, user, order_id)| Op::Refund { coupon, user, order_id }),
        2 => (coupon.clone(), user.clone(), order.clone())
            .prop_map(|(coupon, user, order_id)| Op::Lock { coupon, user, order_id }),
        1 => (coupon, user, order)
            .prop_map(|(coupon, user, order_id)| Op::Release { coupon, user, order_id }),
    ]
}

fn fault(templates: u32) -> impl Strategy<Value = Fault> {
    prop_oneof![
        1 => (0..templates).prop_map(|template| Fault::DropTemplateKeys { template }),
        1 => Just(Fault::ScriptFlush),
        1 => Just(Fault::TerminateBackends),
        1 => (1u32..=3).prop_map(|n| Fault::FailClaimAfterRedis { n }),
        1 => (1u32..=3).prop_map(|n| Fault::FailClaimAfterPersist { n }),
        1 => (20u64..=200).prop_map(|ms| Fault::DelayClaimAfterRedis { ms }),
        1 => (1u32..=3).prop_map(|n| Fault::FailRefundAfterCommit { n }),
        1 => (1u32..=3).prop_map(|n| Fault::FailRedeemAfterUpdate { n }),
        1 => Just(Fault::KillRedis),
        1 => (50u64..=300).prop_map(|ms| Fault::PauseRedis { ms }),
        2 => (5u64..=120, any::<bool>())
            .prop_map(|(lag_ms, warm_scripts)| Fault::StaleRdbRestart { lag_ms, warm_scripts }),
        2 => (5u64..=120, any::<bool>())
            .prop_map(|(lag_ms, warm_scripts)| Fault::AofLossRestart { lag_ms, warm_scripts }),
        1 => (0..templates, evicted_key()).prop_map(|(template, key)| Fault::EvictKey { template, key }),
        1 => (0..templates).prop_map(|template| Fault::AbortRebuild { template }),
        1 => grey_fault(),
        1 => Just(Fault::KillEngine),
    ]
}

/// The grey faults: each lasts past the property tests' engine deadline
/// ([`CASE_DEADLINE`]), so that an engine without deadlines hangs through it.
pub fn grey_fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        (3000u64..=3500).prop_map(|ms| Fault::BlackholePostgres { ms }),
        (3000u64..=3500).prop_map(|ms| Fault::BlackholeRedis { ms }),
        (3000u64..=3500).prop_map(|ms| Fault::PausePostgres { ms }),
        (20u64..=100, 500u64..=1500)
            .prop_map(|(latency_ms, ms)| Fault::SlowPostgres { latency_ms, ms }),
        (3000u64..=3500).prop_map(|ms| Fault::PartitionSecondEngine { ms }),
        (2_000u64..=20_000, 500u64..=1500)
            .prop_map(|(bytes_per_sec, ms)| Fault::ThrottleRedis { bytes_per_sec, ms }),
    ]
}

fn evicted_key() -> impl Strategy<Value = EvictedKey> {
    prop_oneof![
        Just(EvictedKey::Claimed),
        Just(EvictedKey::Epoch),
        (0..REQUESTS).prop_map(EvictedKey::Req),
    ]
}

/// Claims only, on one template, by 3–`max_processes` processes of 6–`max_ops` claims each
/// (claims slowed by a fault then last past a failover that takes tens of milliseconds):
/// a sale with enough claims on both sides of a fault for a Redis that forgot some of them
/// to admit past the stock or a user's limit. It draws on more users and request ids than
/// [`scenarios`]: with four users and six request ids the first claims of the processes,
/// all at once, spend every request id and put every user at a limit of one before any
/// fault can strike, and a Redis that forgets what came after has nothing left to forget.
pub fn claim_rush(max_processes: usize, max_ops: usize) -> impl Strategy<Value = Scenario> {
    const RUSH_USERS: u32 = 8;
    const RUSH_REQUESTS: u32 = 32;
    let claim = (
        (0..RUSH_USERS).prop_map(|u| format!("u{u}")),
        (0..RUSH_REQUESTS).prop_map(|r| format!("r{r}")),
    )
        .prop_map(|(user, request_id)| Op::Claim {
            template: 0,
            user,
            request_id,
        });
    (
        template_spec(0),
        prop::collection::vec(
            prop::collection::vec(claim, 6..=max_ops.max(6)),
            3..=max_processes.max(3),
        ),
    )
        .prop_map(|(template, processes)| Scenario {
            templates: vec![template],
            processes,
            faults: Vec::new(),
        })
}

/// Checkout's rush (mall #1003's shape): one coupon, 3–`max_processes` orders placed with
/// it at once. Every process claims it under the same request id (an idempotent repeat: all
/// get the one coupon), then locks it for its own order and pays, abandons it, or cancels
/// and places a second order with the coupon (oneCoupon's missing release shows there).
pub fn checkout_rush(max_processes: usize) -> impl Strategy<Value = Scenario> {
    let coupon = CouponRef {
        template: 0,
        request_id: "r0".into(),
    };
    let process = move |p: usize, then: u8| {
        let (user, order_id) = ("u0".to_owned(), format!("o{p}"));
        let mut ops = vec![
            Op::Claim {
                template: 0,
                user: user.clone(),
                request_id: coupon.request_id.clone(),
            },
            Op::Lock {
                coupon: coupon.clone(),
                user: user.clone(),
                order_id: order_id.clone(),
            },
        ];
        ops.extend(match then {
            0 => Some(Op::Redeem {
                coupon: coupon.clone(),
                user: user.clone(),
                order_id,
            }),
            1 => Some(Op::Release {
                coupon: coupon.clone(),
                user: user.clone(),
                order_id,
            }),
            _ => None,
        });
        if then == 1 {
            let again = format!("o{p}b");
            ops.push(Op::Lock {
                coupon: coupon.clone(),
                user: user.clone(),
                order_id: again.clone(),
            });
            ops.push(Op::Redeem {
                coupon: coupon.clone(),
                user,
                order_id: again,
            });
        }
        ops
    };
    (
        template_spec(0),
        prop::collection::vec(0u8..3, 3..=max_processes.max(3)),
    )
        .prop_map(move |(template, thens)| Scenario {
            templates: vec![template],
            processes: thens
                .into_iter()
                .enumerate()
                .map(|(p, then)| process(p, then))
                .collect(),
            faults: Vec::new(),
        })
}

/// Scenarios of 2–`max_processes` processes of 1–`max_ops` operations, with up to
/// `max_faults` faults.
pub fn scenarios(
    max_processes: usize,
    max_ops: usize,
    max_faults: usize,
) -> impl Strategy<Value = Scenario> {
    templates().prop_flat_map(move |templates| {
        let n = templates.len() as u32;
        (
            Just(templates),
            prop::collection::vec(prop::collection::vec(op(n), 1..=max_ops), 2..=max_processes),
            prop::collection::vec(
                (0u64..=60, fault(n)).prop_map(|(at_ms, fault)| TimedFault { at_ms, fault }),
                0..=max_faults,
            ),
        )
            .prop_map(|(templates, processes, faults)| Scenario {
                templates,
                processes,
                faults,
            })
    })
}

/// A failover on the case's own cluster: the master of a template's slot killed, or a
/// lagging replica promoted; or that slot resharded to another master; or that master's bus
/// held from its peers.
pub fn failover(templates: u32) -> impl Strategy<Value = Fault> {
    prop_oneof![
        (0..templates).prop_map(|template| Fault::KillSlotMaster { template }),
        (0..templates).prop_map(|template| Fault::MigrateSlot { template }),
        (0..templates, 500u64..=2_500).prop_map(|(template, ms)| Fault::HoldBus { template, ms }),
        (0..templates, 5u64..=120, any::<bool>()).prop_map(|(template, lag_ms, warm_scripts)| {
            Fault::LaggingTakeover {
                template,
                lag_ms,
                warm_scripts,
            }
        }),
    ]
}

/// Scenarios of 2–`max_processes` processes of 1–`max_ops` operations, run against a
/// cluster of the case's own with one failover and, sometimes, claims held between the Redis
/// admission and the batch across it (so reservations straddle the promotion).
pub fn failover_scenarios(max_processes: usize, max_ops: usize) -> impl Strategy<Value = Scenario> {
    (
        scenarios(max_processes, max_ops, 0),
        0u64..=60,
        prop::option::of(10u64..=40),
    )
        .prop_flat_map(|(s, at_ms, delay)| {
            let n = s.templates.len() as u32;
            (Just(s), failover(n)).prop_map(move |(mut s, fault)| {
                s.faults = delay
                    .map(|ms| TimedFault {
                        at_ms: 0,
                        fault: Fault::DelayClaimAfterRedis { ms },
                    })
                    .into_iter()
                    .chain([TimedFault { at_ms, fault }])
                    .collect();
                s
            })
        })
}

/// Scenarios on a cluster of the case's own whose only fault is a template's slot migrating
/// while the processes run, held past the engine's deadline ([`CASE_DEADLINE`])
/// so that a claim the migration keeps from being served fails rather than waits it out
/// (every operation must get a definite answer).
pub fn slot_migration_scenarios(
    max_processes: usize,
    max_ops: usize,
) -> impl Strategy<Value = Scenario> {
    let hold = CASE_DEADLINE.as_millis() as u64;
    (
        scenarios(max_processes, max_ops, 0),
        hold + 500..=hold + 1_000,
    )
        .prop_flat_map(|(s, until_ms)| {
            let n = s.templates.len() as u32;
            (Just(s), 0..n).prop_map(move |(mut s, template)| {
                s.faults = vec![TimedFault {
                    at_ms: until_ms,
                    fault: Fault::MigrateSlot { template },
                }];
                s
            })
        })
}
