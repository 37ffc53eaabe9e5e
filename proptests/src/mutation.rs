//! Mutation score (docs/ARCHITECTURE.md, "Mutants"): runs the property tests against every
//! engine variant and records, per mutant, whether the harness killed it, by which invariant,
//! after how many cases, and how small the shrunk counterexample is. The correct engine must
//! survive.

use std::path::PathBuf;

use coupon_engine::{Persistence, Variant};
use serde::Serialize;

use proptest::prelude::*;

use crate::{
    op::{CouponRef, Op, Policy, TemplateSpec},
    property::{PropertyConfig, check_with},
    run::RunConfig,
    scenario::{
        Fault, Scenario, TimedFault, checkout_rush, claim_rush, scenarios, slot_migration_scenarios,
    },
};

/// One row of the mutation table.
#[derive(Debug, Clone, Serialize)]
pub struct MutantScore {
    /// Variant name (`correct`, `d1`, …).
    pub variant: String,
    /// The defect it reproduces.
    pub defect: &'static str,
    /// Whether the harness found a violation (for `correct`: whether it wrongly did).
    pub killed: bool,
    /// Invariants the shrunk counterexample violates.
    pub invariants: Vec<String>,
    /// The generated case that first failed (1-based).
    pub cases_to_kill: Option<u32>,
    /// Operations in the shrunk counterexample.
    pub shrunk_ops: Option<usize>,
    /// Faults in the shrunk counterexample.
    pub shrunk_faults: Option<usize>,
    /// Where the counterexample's history was written.
    pub history: Option<PathBuf>,
    /// Harness error, if the run could not be carried out.
    pub error: Option<String>,
    /// Seed to replay.
    pub seed: String,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// The variants to score: all compiled in, or those named in `COUPON_VARIANTS`
/// (comma-separated, e.g. `correct,d8`) to focus a run.
pub fn selected_variants() -> Vec<Variant> {
    match std::env::var("COUPON_VARIANTS") {
        Ok(list) if !list.trim().is_empty() => Variant::all()
            .into_iter()
            .filter(|v| !v.needs_process_faults())
            .filter(|v| {
                list.split(',')
                    .any(|n| n.trim().eq_ignore_ascii_case(&v.name()))
            })
            .collect(),
        _ => Variant::all()
            .into_iter()
            .filter(|v| !v.needs_process_faults())
            .collect(),
    }
}

/// What each variant breaks.
pub fn defect(v: Variant) -> &'static str {
    match v.name().as_str() {
        "d1" => "check-then-decrement outside one atomic step",
        "d2" => "lock released by plain DEL; UPDATE without status guard",
        "d3" => "UPDATE and use-log INSERT outside one transaction; lock leaks",
        "d4" => "refund returns the coupon to the user AND returns stock",
        "d5" => "DB failure after the Redis deduct neither rolled forward nor compensated",
        "d5b" => "naive retry of a failed claim under a new key",
        "d6" => "missing stock key rebuilt from total_stock",
        "d6b" => "rebuild counts rows without fencing late writers",
        "d7" => "no idempotency key: retries claim again",
        "d8" => "claim batch inserts whatever Redis admitted: no stock or limit check in Postgres",
        "d9" => "claim batch answered when it commits, before the commit is durable",
        "d10" => "a restarted Redis admits before its identity is checked and its counters rebuilt",
        "d11" => "claim window judged by the admitting server's clock only",
        "d12" => "no deadlines: operations and claim batches wait as long as their store",
        "d13" => "async persister holds acknowledged intents only in memory until written",
        "d14" => "no Postgres identity check: Redis trusted across a Postgres failover",
        "d15" => "every identity check rebuilds every live template (a rebuild storm)",
        "d16" => "the sold-out gate refuses retries of granted claims too",
        "d17" => "the sold-out gate never opens again when stock comes back",
        "d18" => {
            "the claim names a key of its own per request: no claim served while its slot migrates"
        }
        "mall1003" => {
            "macrozheng/mall #1003: the order checks the coupon is free, then locks it unguarded"
        }
        "litemall581" => {
            "linlinjava/litemall #581: the claim counts rows, then inserts, not atomically"
        }
        "mall1002" => "macrozheng/mall #1002: the deduction is not capped at the order amount",
        "one_coupon_lock_unchecked" => {
            "oneCoupon settlement: the LOCKING update's row count is never checked"
        }
        "one_coupon_no_release" => {
            "oneCoupon settlement: a cancelled order never releases its coupon"
        }
        _ => "none (the real engine)",
    }
}

/// Most faults per case for a variant: defects that only show under faults get them.
pub fn max_faults(v: Variant) -> usize {
    match v.name().as_str() {
        "d3" | "d5" | "d5b" | "d6" | "d6b" | "d8" => 3,
        _ => 0,
    }
}

/// The scenarios a variant is tested with. The unfenced rebuild (D6b) only shows when a
/// claim is between its Redis deduct and its insert while the keys are lost, so its cases
/// always hold claims there and drop the keys meanwhile (docs/ARCHITECTURE.md, "Rebuild and
/// fencing").
/// Trusting Redis (D8) only shows when Redis comes back stale while claims go on, so its
/// cases are rushes of claims through a restart of Redis from an older snapshot; admitting
/// on an unchecked new server (D10) too, through a restart that answers NOSCRIPT.
fn strategy(v: Variant, cfg: &PropertyConfig) -> BoxedStrategy<Scenario> {
    let base = scenarios(cfg.max_processes, cfg.max_ops, cfg.max_faults);
    match v.name().as_str() {
        "d6b" => rebuild_race(base),
        "d8" => stale_restart(claim_rush(cfg.max_processes, cfg.max_ops)),
        "d10" => cold_stale_restart(claim_rush(cfg.max_processes, cfg.max_ops)),
        "d9" => postgres_crash(base),
        "d5b" => unknown_outcomes(base),
        "d5" => failed_after_redis(base),
        "d12" => grey_from_the_start(base),
        "d13" => killed_mid_batch(claim_rush(cfg.max_processes, cfg.max_ops)),
        "mall1003" | "one_coupon_no_release" => checkout_rush(cfg.max_processes).boxed(),
        "d16" | "d17" => sold_out_and_back().boxed(),
        "d18" => slot_migration_scenarios(cfg.max_processes, cfg.max_ops).boxed(),
        _ => base.boxed(),
    }
}

/// The sold-out gate's defects (D16, D17) only show once a sale sold out: one shopper sells
/// a stock of 1–2 out, retries its own claim (whose answer a client may have lost), uses the
/// coupon and refunds it to stock, and a newcomer then claims the place that came back;
/// another process claims beside it.
pub fn sold_out_and_back() -> impl Strategy<Value = Scenario> {
    let claim = |user: &str, request: &str| Op::Claim {
        template: 0,
        user: user.into(),
        request_id: request.into(),
    };
    let coupon = CouponRef {
        template: 0,
        request_id: "r0".into(),
    };
    let shopper = vec![
        claim("u0", "r0"),
        claim("u1", "r1"),
        claim("u2", "r2"),
        claim("u0", "r0"),
        Op::Redeem {
            coupon: coupon.clone(),
            user: "u0".into(),
            order_id: "o0".into(),
        },
        Op::Refund {
            coupon,
            user: "u0".into(),
            order_id: "o0".into(),
        },
        claim("u3", "r3"),
    ];
    let beside = prop::collection::vec(
        (4u32..8, 4u32..12).prop_map(|(u, r)| Op::Claim {
            template: 0,
            user: format!("u{u}"),
            request_id: format!("r{r}"),
        }),
        0..=3,
    );
    (1i64..=2, beside).prop_map(move |(stock, beside)| Scenario {
        templates: vec![TemplateSpec {
            id: 0,
            stock,
            per_user_limit: 1,
            policy: Policy::ReturnToStock,
        }],
        processes: if beside.is_empty() {
            vec![shopper.clone()]
        } else {
            vec![shopper.clone(), beside]
        },
        faults: Vec::new(),
    })
}

/// Losing in-flight intents with the process (D13) only shows when a server dies with a
/// batch in flight: every case is a rush of claims, half of them through a second engine
/// that is killed at its first batch and restarted.
pub fn killed_mid_batch(
    base: impl Strategy<Value = Scenario> + 'static,
) -> BoxedStrategy<Scenario> {
    base.prop_map(|mut s| {
        s.faults = vec![TimedFault {
            at_ms: 0,
            fault: Fault::KillEngine,
        }];
        s
    })
    .boxed()
}

/// Every case with one grey fault from its start (see [`grey_from_the_start`]).
fn grey_cases(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    (base, crate::scenario::grey_fault())
        .prop_map(|(mut s, fault)| {
            s.faults = vec![TimedFault { at_ms: 0, fault }];
            s
        })
        .boxed()
}

/// Waiting without a deadline (D12) only shows when a store stops answering: every case
/// has one grey fault (a blackholed link or a paused Postgres) from its start: a case's
/// operations take some tens of milliseconds, so a later fault meets none.
fn grey_from_the_start(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    grey_cases(base)
        .prop_filter("D12 needs a fault that stops a store", |s| {
            s.faults.iter().all(|f| {
                !matches!(
                    f.fault,
                    Fault::SlowPostgres { .. } | Fault::ThrottleRedis { .. }
                )
            })
        })
        .boxed()
}

/// A naive retry under a new key (D5b) only shows when a claim's outcome is unknown and the
/// retry may succeed: every case fails claims right after their row is stored, and lets a
/// user hold two coupons, so the retry's second coupon is one no single claim explains.
/// (Left to the generic scenarios, it needed up to 55 cases.)
fn unknown_outcomes(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    first_claims_fail(base, |n| Fault::FailClaimAfterPersist { n })
        .prop_map(|mut s| {
            for t in &mut s.templates {
                t.stock = t.stock.max(2);
                t.per_user_limit = t.per_user_limit.max(2);
            }
            s
        })
        .boxed()
}

/// Losing a claim that failed between Redis and Postgres (D5) only shows when a claim fails
/// there: every case fails its first claims at that point. Left to the generic scenarios,
/// where that fault is one of many, it once survived CI's 40 cases.
fn failed_after_redis(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    first_claims_fail(base, |n| Fault::FailClaimAfterRedis { n }).boxed()
}

/// The case's only fault, from its start: its first 1–3 claims fail with `fault(n)`.
fn first_claims_fail(
    base: impl Strategy<Value = Scenario> + 'static,
    fault: fn(u32) -> Fault,
) -> impl Strategy<Value = Scenario> {
    (base, 1u32..=3).prop_map(move |(mut s, n)| {
        s.faults = vec![TimedFault {
            at_ms: 0,
            fault: fault(n),
        }];
        s
    })
}

fn stale_restart(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    // Warm: a restart that answers NOSCRIPT is checked and rebuilt before it admits
    // anything, so only a stale server that gives no sign lets D8's trust show.
    rolled_back_mid_run(base, 5..=40, |lag_ms| Fault::StaleRdbRestart {
        lag_ms,
        warm_scripts: true,
    })
}

/// The same restart, cold: the server comes back without the engine's scripts, as a real
/// one does, and its NOSCRIPT is the sign the engine must act on before it admits.
fn cold_stale_restart(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    rolled_back_mid_run(base, 5..=40, |lag_ms| Fault::StaleRdbRestart {
        lag_ms,
        warm_scripts: false,
    })
}

/// Trusting Redis (D8) through a failover: the template's lagging replica is promoted
/// mid-run, so what it never received is admitted again. It is given the engine's current
/// scripts first, to give no sign of being new: a replica without them answers NOSCRIPT
/// and is checked and rebuilt before it admits anything. The cut waits for the replica to
/// catch up, and a promotion takes tens of milliseconds, hence the longer lag.
pub fn lagging_promotion(
    base: impl Strategy<Value = Scenario> + 'static,
) -> BoxedStrategy<Scenario> {
    rolled_back_mid_run(base, 30..=80, |lag_ms| Fault::LaggingTakeover {
        template: 0,
        lag_ms,
        warm_scripts: true,
    })
}

/// Answering before the commit is durable (D9) only shows when Postgres crashes after the
/// answer: every case crashes the case's own Postgres while claims are decided.
pub fn postgres_crash(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    (base, 10u64..=80)
        .prop_map(|(mut s, at_ms)| {
            s.faults = vec![TimedFault {
                at_ms,
                fault: Fault::CrashPostgres,
            }];
            s
        })
        .boxed()
}

/// A Postgres failover to a synchronous standby, once, while claims are decided: what was
/// acknowledged from a commit the standby confirmed survives the promotion; an answer given
/// before its commit was durable (D9) may not.
pub fn postgres_failover(
    base: impl Strategy<Value = Scenario> + 'static,
) -> BoxedStrategy<Scenario> {
    (base, 10u64..=80)
        .prop_map(|(mut s, at_ms)| {
            s.faults = vec![TimedFault {
                at_ms,
                fault: Fault::FailOverPostgres,
            }];
            s
        })
        .boxed()
}

/// Tight templates and slowed claims, with `rollback(lag_ms)` striking early: a fault that
/// brings Redis back `lag_ms` of writes behind.
fn rolled_back_mid_run(
    base: impl Strategy<Value = Scenario> + 'static,
    lag: std::ops::RangeInclusive<u64>,
    rollback: fn(u64) -> Fault,
) -> BoxedStrategy<Scenario> {
    (base, 10u64..=30, 0u64..=3, lag)
        .prop_map(move |(mut s, delay, strike_at, lag_ms)| {
            // Tight templates, so what a stale Redis admits again is over a bound: a limit
            // of one, and two coupons more than the processes. The first claims of all the
            // processes arrive at once, often before the fault has its copy of Redis; a user
            // Redis forgot is admitted again (I3), and where the stock binds before the
            // users do, what the first claims left is spent before the rollback and admitted
            // again after it (I1).
            let stock = s.processes.len() as i64 + 2;
            for t in &mut s.templates {
                t.stock = stock;
                t.per_user_limit = 1;
            }
            s.faults = vec![
                // Slowed claims span the rollback: admitted before it (and lost by it),
                // and after it, against the stale counters.
                TimedFault {
                    at_ms: 0,
                    fault: Fault::DelayClaimAfterRedis { ms: delay },
                },
                TimedFault {
                    at_ms: strike_at,
                    fault: rollback(lag_ms),
                },
            ];
            s
        })
        .boxed()
}

/// Runs `v` against [`lagging_promotion`] scenarios (each on a cluster of its own) with at
/// most `cases` cases and `shrink` shrinking steps: a mutant must be killed, the correct
/// engine must pass.
pub fn score_failover(v: Variant, cases: u32, shrink: u32) -> crate::property::PropertyOutcome {
    let run = RunConfig {
        variant: v,
        ..RunConfig::default()
    };
    let cfg = PropertyConfig {
        cases,
        max_shrink_iters: shrink,
        persist_failures: false,
        ..PropertyConfig::new(&format!("failover_{}", v.name()), cases, run)
    };
    check_with(
        &cfg,
        lagging_promotion(claim_rush(cfg.max_processes, cfg.max_ops)),
    )
}

fn rebuild_race(base: impl Strategy<Value = Scenario> + 'static) -> BoxedStrategy<Scenario> {
    (base, 50u64..=200, 5u64..=40)
        .prop_map(|(mut s, delay, drop_at)| {
            s.faults = vec![
                TimedFault {
                    at_ms: 0,
                    fault: Fault::DelayClaimAfterRedis { ms: delay },
                },
                TimedFault {
                    at_ms: drop_at,
                    fault: Fault::DropTemplateKeys { template: 0 },
                },
            ];
            s
        })
        .boxed()
}

/// Whether a kill names I1 (no oversell) or I3 (per-user limit): mutant D8 must die of one
/// of these, as its defect is letting Redis's admissions through; a kill by I2 alone was
/// the counter it once neglected. By invariant, not by finding: I1 also flags a negative
/// Redis stock and I3 a Redis per-user count that disagrees with Postgres, which a stale
/// Redis shows too; the shrunk history (`reports/mutation-score.md`) says which it was.
pub fn caught_by_what_it_issued(invariants: &[String]) -> bool {
    invariants.iter().any(|i| i == "I1" || i == "I3")
}

/// Runs the property for `v` with at most `cases` cases and `shrink` shrinking steps.
pub fn score(v: Variant, cases: u32, shrink: u32) -> MutantScore {
    let run = RunConfig {
        variant: v,
        persistence: v.defect_persistence().unwrap_or_default(),
        ..RunConfig::default()
    };
    let cfg = PropertyConfig {
        cases,
        max_faults: max_faults(v),
        max_shrink_iters: shrink,
        persist_failures: false,
        ..PropertyConfig::new(&format!("mutant_{}", v.name()), cases, run)
    };
    let mut o = check_with(&cfg, strategy(v, &cfg));
    if v == Variant::Correct {
        // The correct engine must also pass the runs aimed at the rebuild race (D6b), at
        // a stale Redis with and without a sign (D8, D10), at claims of unknown outcome
        // (D5b) and at one coupon raced onto several orders (mall #1003, oneCoupon).
        type Aimed = fn(usize, usize) -> BoxedStrategy<Scenario>;
        let aimed: [(&str, Aimed); 5] = [
            ("correct_rebuild_race", |p, o| {
                rebuild_race(scenarios(p, o, 0))
            }),
            ("correct_stale_restart", |p, o| {
                stale_restart(claim_rush(p, o))
            }),
            ("correct_cold_stale_restart", |p, o| {
                cold_stale_restart(claim_rush(p, o))
            }),
            ("correct_unknown_outcomes", |p, o| {
                unknown_outcomes(scenarios(p, o, 0))
            }),
            ("correct_checkout_rush", |p, _| checkout_rush(p).boxed()),
        ];
        for (name, aim) in aimed {
            if !o.passed() {
                break;
            }
            let run = PropertyConfig {
                name: name.into(),
                cases: cases.div_ceil(2),
                ..cfg.clone()
            };
            let elapsed = o.elapsed;
            o = check_with(&run, aim(run.max_processes, run.max_ops));
            o.elapsed += elapsed;
        }
        // The grey faults (D12's, and a partition of one of two engines, a throttled Redis
        // link), each from the start of its case.
        if o.passed() {
            let run = PropertyConfig {
                name: "correct_grey_faults".into(),
                cases: cases.div_ceil(4),
                ..cfg.clone()
            };
            let elapsed = o.elapsed;
            o = check_with(
                &run,
                grey_cases(scenarios(run.max_processes, run.max_ops, 0)),
            );
            o.elapsed += elapsed;
        }
        // And D13's: a server killed mid-batch, in both persistence modes.
        for persistence in [Persistence::Async, Persistence::Sync] {
            if !o.passed() {
                break;
            }
            let run = PropertyConfig {
                name: format!("correct_killed_mid_batch_{persistence:?}").to_lowercase(),
                cases: cases.div_ceil(4),
                run: RunConfig {
                    persistence,
                    ..cfg.run
                },
                ..cfg.clone()
            };
            let elapsed = o.elapsed;
            o = check_with(
                &run,
                killed_mid_batch(claim_rush(run.max_processes, run.max_ops)),
            );
            o.elapsed += elapsed;
        }
    }
    MutantScore::from_outcome(v.name(), defect(v), o)
}

impl MutantScore {
    /// Whether the row is the correct engine's (which must pass), not a mutant's.
    pub fn is_correct(&self) -> bool {
        self.variant.starts_with("correct")
    }

    /// The row of a property run against a variant (`label` names the variant and, for a
    /// run aimed at one fault, the fault).
    pub fn from_outcome(
        label: String,
        defect: &'static str,
        o: crate::property::PropertyOutcome,
    ) -> Self {
        Self {
            variant: label,
            defect,
            // Killed only by a violation: a checker that could not decide kills nothing.
            killed: o.violated && o.minimal.is_some(),
            invariants: o
                .minimal
                .as_ref()
                .map(|m| m.invariants())
                .unwrap_or_default(),
            cases_to_kill: o.first_failure_at,
            shrunk_ops: o.minimal.as_ref().map(|m| m.scenario.size()),
            shrunk_faults: o.minimal.as_ref().map(|m| m.scenario.faults.len()),
            history: o.history_path.map(workspace_relative),
            error: o.harness_error,
            seed: o.seed,
            seconds: o.elapsed.as_secs_f64(),
        }
    }
}

/// `path` relative to the workspace root when it lies inside it, so the committed table
/// names no directory of the machine that made it.
fn workspace_relative(path: PathBuf) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(p), Ok(r)) => p.strip_prefix(&r).map(PathBuf::from).unwrap_or(p),
        _ => path,
    }
}

/// The table as Markdown.
pub fn markdown(rows: &[MutantScore], cases: u32) -> String {
    let mut md = String::from("# Mutation score\n\n");
    md.push_str(&format!(
        "Property tests against every engine variant (at most {cases} generated cases each; \
         defects that need faults get a fault schedule). Regenerate with \
         `cargo build --release --workspace --bins && target/release/mutation-score`.\n\n"
    ));
    let (wild, ours): (Vec<&MutantScore>, Vec<&MutantScore>) =
        rows.iter().partition(|r| seen_in_the_wild(&r.variant));
    table(&mut md, &ours);
    md.push_str(
        "\n## Seen in the wild\n\nBugs shipped in public coupon systems, each reproduced as \
         the engine with that one defect and named by where it was reported (the defect \
         column says the bug; docs/ARCHITECTURE.md, \"Mutants\"). The correct engine's row \
         above includes the runs aimed at them (a checkout rush: one coupon raced onto \
         several orders, cancel and reorder).\n\n",
    );
    table(&mut md, &wild);
    md.push_str(NOT_HERE);
    md
}

/// Whether a variant reproduces a bug reported in a public coupon system (named by its
/// source) rather than one of the project's own defect classes (`d…`).
fn seen_in_the_wild(name: &str) -> bool {
    !name.starts_with('d') && !name.starts_with("correct")
}

/// One table of scores.
fn table(md: &mut String, rows: &[&MutantScore]) {
    md.push_str(
        "| variant | defect | verdict | caught by | cases to kill | shrunk ops (faults) |\n",
    );
    md.push_str("|---|---|---|---|---|---|\n");
    for r in rows {
        let verdict = match (r.is_correct(), r.killed, &r.error) {
            (_, _, Some(_)) => "harness error".to_owned(),
            (true, false, _) => "passes (no violation)".to_owned(),
            (true, true, _) => "FAILS".to_owned(),
            (false, true, _) => "killed".to_owned(),
            (false, false, _) => "SURVIVED".to_owned(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.variant,
            r.defect,
            verdict,
            if r.invariants.is_empty() {
                "—".into()
            } else {
                r.invariants.join(", ")
            },
            r.cases_to_kill.map_or("—".into(), |c| c.to_string()),
            r.shrunk_ops.map_or("—".into(), |n| format!(
                "{n} ({})",
                r.shrunk_faults.unwrap_or(0)
            )),
        ));
    }
}

/// The mutants these runs cannot score, and where they are scored instead.
const NOT_HERE: &str = "\nNot in this table: **d11** (the claim window judged by the admitting \
server's clock only) needs a server whose clock is off, a per-process fault the in-process \
property tests cannot give one engine of two. The load test scores it: \
`coupon-loadtest flash-sale --duration 10 --servers 3 --nemesis clock-skew --mutant d11` \
must fail I10 (no coupon granted outside the claim window by the true clock); CI runs it, and \
the correct engine's run with the same fault must pass. The grey faults (links blackholed, \
slowed or throttled, Postgres paused, one of two engines cut off from Postgres, an engine \
killed mid-batch) are in the correct engine's runs above.\n";
