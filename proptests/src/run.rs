//! Runs one scenario for real: an isolated engine (own database and Redis namespace; own
//! `redis-server` when the case has faults), processes released together by a barrier, the
//! nemesis alongside, then settle (heal, flush, reconcile) and check everything.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use coupon_engine::{
    CouponEngine, EngineConfig, EngineError, Finding, Invariant, NewTemplate, Persistence,
    ReconcileOptions, RefundPolicy, Variant,
    domain::ids::{RequestId, TemplateId, UserId},
};
use coupon_testkit::{
    Backends, TestEnv,
    fault_proxy::FaultProxy,
    local::{LocalPostgres, LocalRedis, RedisPersistence},
    pg_failover::{ReplicatedPostgres, Replication},
    redis_cluster::LocalCluster,
    shared_backends,
};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use uuid::Uuid;

use coupon_verify::validity::{Composed, Validity};

use crate::{
    ack::{FinalCoupon, FinalState, FinalStatus},
    checkers::{self, CaseRecord},
    engine_process::{EngineProcess, Killed},
    history::{EventKind, History, ProcessIds, Recorder},
    linearizability::{Budget, Verdict, check_partitioned},
    nemesis::{self, Target},
    op::{CouponRef, Op, OpResult, Policy, Refusal},
    scenario::{Fault, Scenario},
};

pub use crate::scenario::{CASE_DEADLINE, LIVENESS_MARGIN};

/// How a case runs.
#[derive(Debug, Clone, Copy)]
pub struct RunConfig {
    /// Correct engine or a mutant.
    pub variant: Variant,
    /// Claim persistence mode.
    pub persistence: Persistence,
    /// An operation taking longer is recorded as `unknown`.
    pub op_timeout: Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            variant: Variant::Correct,
            persistence: Persistence::Sync,
            op_timeout: Duration::from_secs(15),
        }
    }
}

/// Everything about one executed case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseReport {
    /// The scenario run.
    pub scenario: Scenario,
    /// Engine variant.
    pub variant: Variant,
    /// The recorded history.
    pub history: History,
    /// The final state the ack checker saw.
    pub final_state: FinalState,
    /// What the nemesis did.
    pub nemesis: Vec<String>,
    /// The errors behind `unknown` outcomes.
    pub errors: Vec<String>,
    /// The linearizability verdict.
    pub verdict: Verdict,
    /// Every checker's result, merged (valid, invalid or unknown).
    pub checks: Composed,
    /// Every violation, from every checker (the invalid ones' findings).
    pub findings: Vec<Finding>,
}

impl CaseReport {
    /// The distinct invariants violated, sorted.
    pub fn invariants(&self) -> Vec<String> {
        let mut v: Vec<Invariant> = self.findings.iter().map(|f| f.invariant).collect();
        v.sort();
        v.dedup();
        v.into_iter().map(|i| i.id().to_owned()).collect()
    }
}

/// The stores a case runs on: the shared ones, or stores of its own for the faults that
/// kill, restart, fail over or crash them.
struct CaseStores {
    backends: Arc<Backends>,
    pg_link: Option<Arc<FaultProxy>>,
    redis_link: Option<Arc<FaultProxy>>,
    redis: Option<Arc<tokio::sync::Mutex<LocalRedis>>>,
    cluster: Option<Arc<tokio::sync::Mutex<LocalCluster>>>,
    postgres: Option<Arc<LocalPostgres>>,
    replicated_postgres: Option<Arc<ReplicatedPostgres>>,
    failover: bool,
}

impl CaseStores {
    async fn provision(scenario: &Scenario) -> anyhow::Result<Self> {
        let shared = shared_backends().await?;
        let failover = scenario.faults.iter().any(|f| f.fault.needs_cluster());
        let own_cluster = if failover {
            let proxies = scenario.faults.iter().any(|f| f.fault.needs_bus_proxies());
            let cluster = tokio::task::spawn_blocking(move || {
                if proxies {
                    LocalCluster::start_with_bus_proxies(RedisPersistence::None)
                } else {
                    LocalCluster::start(RedisPersistence::None)
                }
            })
            .await??;
            Some(Arc::new(tokio::sync::Mutex::new(cluster)))
        } else {
            None
        };
        let own_postgres = if scenario.faults.iter().any(|f| f.fault.needs_own_postgres()) {
            // Asynchronous commits of a small case stay in shared memory, unwritten, for up to
            // 10 s (the most Postgres allows; it writes sooner only once a WAL page fills), so an
            // acknowledgement that did not wait for its commit to be written is lost by the crash
            // whenever it strikes, not only within the default 200 ms.
            let pg = tokio::task::spawn_blocking(|| {
                LocalPostgres::start_with(&["wal_writer_delay=10s"])
            })
            .await??;
            Some(Arc::new(pg))
        } else {
            None
        };
        let replicated_postgres = if scenario
            .faults
            .iter()
            .any(|f| f.fault.needs_replicated_postgres())
        {
            let pair =
                tokio::task::spawn_blocking(|| ReplicatedPostgres::start(Replication::Synchronous))
                    .await??;
            Some(Arc::new(pair))
        } else {
            None
        };
        let database_url = match (&own_postgres, &replicated_postgres) {
            (Some(pg), _) => pg.url(),
            (None, Some(pair)) => pair.url(),
            (None, None) => shared.database_url.clone(),
        };
        let own_redis = if scenario.faults.is_empty() || failover {
            None
        } else {
            // With AOF on, so the restarts that make Redis stale have something to restart from.
            Some(Arc::new(tokio::sync::Mutex::new(LocalRedis::start_with(
                RedisPersistence::Aof,
            )?)))
        };
        // A link fault puts fault proxies between the engine and its own stores.
        let linked = scenario.faults.iter().any(|f| f.fault.needs_link()) && own_redis.is_some();
        let (mut pg_link, mut redis_link) = (None, None);
        let mut database_url = database_url;
        if linked {
            let (link, url) = FaultProxy::for_url(&database_url)?;
            database_url = url;
            pg_link = Some(Arc::new(link));
        }
        let backends = match (&own_redis, &own_cluster) {
            (Some(r), _) => {
                let mut url = r.lock().await.url();
                if linked {
                    let (link, proxied) = FaultProxy::for_url(&url)?;
                    url = proxied;
                    redis_link = Some(Arc::new(link));
                }
                Arc::new(Backends::with_urls(url, database_url, None))
            }
            (None, Some(c)) => Arc::new(Backends::with_target(
                c.lock().await.target(),
                database_url,
                None,
            )),
            (None, None) => shared,
        };
        Ok(Self {
            backends,
            pg_link,
            redis_link,
            redis: own_redis,
            cluster: own_cluster,
            postgres: own_postgres,
            replicated_postgres,
            failover,
        })
    }
}

/// Runs `scenario` and checks I1–I9.
pub async fn run_case(scenario: &Scenario, cfg: RunConfig) -> anyhow::Result<CaseReport> {
    let stores = CaseStores::provision(scenario).await?;
    let config = EngineConfig {
        variant: cfg.variant,
        persistence: cfg.persistence,
        lock_wait: Duration::from_millis(500),
        idempotency_ttl: Duration::from_secs(3600),
        deadline: CASE_DEADLINE,
        // With two servers, one's sold-out gate admits stock given back through the other
        // only within the gate's bound: a staleness the linearizable model does not allow
        // (the integration test `sold_out_gate` holds the bound). One server reopens its
        // gate when it gives stock back, so single-server cases run the gate as shipped.
        sold_out_recheck: if scenario.has_second_engine() {
            Duration::ZERO
        } else {
            coupon_engine::DEFAULT_SOLD_OUT_RECHECK
        },
        ..EngineConfig::default()
    };
    let env = TestEnv::on(stores.backends.clone(), config.clone()).await?;
    let engine = env.engine.clone();
    let partitioned = scenario
        .faults
        .iter()
        .any(|f| matches!(f.fault, Fault::PartitionSecondEngine { .. }));
    let (second, second_pg_link) = if scenario.has_second_engine() {
        let config = EngineConfig {
            namespace: env.namespace.clone(),
            ..config
        };
        // Its own link, so that a partition cuts it off alone.
        let (link, database_url) = if partitioned {
            let (link, url) = FaultProxy::for_url(&env.database_url)?;
            (Some(Arc::new(link)), url)
        } else {
            (None, env.database_url.clone())
        };
        let process = EngineProcess::start(database_url, env.redis.clone(), config).await?;
        (Some(Arc::new(process)), link)
    } else {
        (None, None)
    };
    let templates = create_templates(&engine, scenario).await?;
    if stores.failover {
        // The identity the counters were built against, recorded before any fault: a
        // deployment has it in Postgres from its previous run; a fresh namespace must not
        // first record it after the promotion.
        engine.check_redis_identity().await?;
    }
    let target = Target {
        engine: engine.clone(),
        templates: templates.clone(),
        redis: stores.redis.clone(),
        cluster: stores.cluster.clone(),
        postgres: stores.postgres.clone(),
        replicated_postgres: stores.replicated_postgres.clone(),
        database_url: env.database_url.clone(),
        pg_link: stores.pg_link.clone(),
        redis_link: stores.redis_link.clone(),
        second: second.clone(),
        second_pg_link,
        migrations: std::sync::Mutex::default(),
    };
    let (history, errors, nemesis) = drive(scenario, &target, cfg.op_timeout).await?;
    if let Some(second) = &second {
        // Its persister's queue written, as a server's clean shutdown does, before the
        // first engine settles what is left.
        second.stop(Duration::from_secs(10)).await;
    }
    settle(&engine).await?;
    let final_state = final_state(&engine, &templates).await?;
    let mut audits = Vec::new();
    for id in &templates {
        audits.push(engine.audit(*id).await?);
    }
    let verdict = check_partitioned(&history, &scenario.templates, Budget::default());
    let checks = checkers::check_all(&CaseRecord {
        scenario,
        history: &history,
        final_state: &final_state,
        audits: &audits,
        verdict: &verdict,
        errors: &errors,
        stale_admissions: engine.stale_admissions(),
    });
    let findings: Vec<Finding> = checks.findings().cloned().collect();
    engine.shutdown().await;
    drop(env);
    // A violation stands whatever the nemesis managed; a pass with a fault that never
    // happened is no pass.
    if checks.validity != Validity::Invalid && !nemesis.failed.is_empty() {
        return Err(FaultNotInjected(nemesis.failed.join("; ")).into());
    }
    Ok(CaseReport {
        scenario: scenario.clone(),
        variant: cfg.variant,
        history,
        final_state,
        nemesis: nemesis.steps,
        errors,
        verdict,
        checks,
        findings,
    })
}

async fn create_templates(
    engine: &CouponEngine,
    scenario: &Scenario,
) -> anyhow::Result<Vec<TemplateId>> {
    let mut templates = Vec::new();
    for t in &scenario.templates {
        let policy = match t.policy {
            Policy::ReturnToUser => RefundPolicy::ReturnToUser,
            Policy::ReturnToStock => RefundPolicy::ReturnToStock,
        };
        let spec = NewTemplate::simple(
            &format!("t{}", t.id),
            t.stock,
            t.per_user_limit as i32,
            policy,
        );
        templates.push(engine.create_template(spec).await?.id);
    }
    Ok(templates)
}

/// A case whose faults did not all happen, and that violated nothing: it proves nothing
/// about those faults, so it is set aside (rejected) rather than passed.
#[derive(Debug, thiserror::Error)]
#[error("the nemesis could not inject the case's faults: {0}")]
pub struct FaultNotInjected(pub String);

/// Runs the scenario's processes concurrently, released together, while the nemesis
/// injects its faults; heals the stores after. The history, the unexpected errors and the
/// nemesis log.
async fn drive(
    scenario: &Scenario,
    target: &Target,
    timeout: Duration,
) -> anyhow::Result<(History, Vec<String>, nemesis::NemesisLog)> {
    let recorder = Recorder::new();
    let pids = Arc::new(ProcessIds::new());
    let coupons = Arc::new(Mutex::new(CouponMap::default()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let barrier = Arc::new(tokio::sync::Barrier::new(scenario.processes.len() + 1));
    let mut tasks = Vec::new();
    for (i, ops) in scenario.processes.iter().enumerate() {
        // With a second engine, every other process is its client.
        let engine = match &target.second {
            Some(second) if i % 2 == 1 => Server::Killable(second.clone()),
            _ => Server::Main(target.engine.clone()),
        };
        let ctx = Ctx {
            engine,
            templates: target.templates.clone(),
            recorder: recorder.clone(),
            pids: pids.clone(),
            coupons: coupons.clone(),
            errors: errors.clone(),
            timeout,
        };
        let (ops, barrier) = (ops.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            ctx.run_process(ops).await;
        }));
    }
    let mut before = nemesis::NemesisLog::default();
    nemesis::before_release(target, &scenario.faults, &mut before).await;
    barrier.wait().await;
    let mut log = nemesis::run(target, scenario.faults.clone()).await;
    before.steps.append(&mut log.steps);
    before.failed.append(&mut log.failed);
    let log = before;
    for t in tasks {
        t.await?;
    }
    nemesis::heal(target).await;
    let errors = errors.lock().map(|e| e.clone()).unwrap_or_default();
    Ok((recorder.snapshot(), errors, log))
}

/// After the faults: drain the persister, then persist every pending intent and apply the
/// outbox (invariants hold at quiescence: docs/ARCHITECTURE.md, "Invariants").
async fn settle(engine: &CouponEngine) -> anyhow::Result<()> {
    engine.flush().await?;
    let now = ReconcileOptions {
        min_pending_age: Duration::ZERO,
    };
    for attempt in 0..20 {
        match engine.reconcile_with(now).await {
            Ok(_) => return Ok(()),
            // Backends may still be coming back from a kill or termination.
            Err(e) if attempt < 19 => {
                tracing::debug!(error = %e, "reconcile retry");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[derive(Default)]
struct CouponMap {
    by_ref: HashMap<CouponRef, Uuid>,
    by_id: HashMap<Uuid, CouponRef>,
}

/// The engine a process sends its operations to.
enum Server {
    Main(CouponEngine),
    Killable(Arc<EngineProcess>),
}

struct Ctx {
    engine: Server,
    templates: Vec<TemplateId>,
    recorder: Recorder,
    pids: Arc<ProcessIds>,
    coupons: Arc<Mutex<CouponMap>>,
    errors: Arc<Mutex<Vec<String>>>,
    timeout: Duration,
}

impl Ctx {
    async fn run_process(&self, ops: Vec<Op>) {
        let mut process = self.pids.next();
        for op in ops {
            // Only coupons whose id an ok claim revealed can be addressed.
            let coupon_id = match op.coupon() {
                Some(r) => match self
                    .coupons
                    .lock()
                    .ok()
                    .and_then(|m| m.by_ref.get(r).copied())
                {
                    Some(id) => Some(id),
                    None => continue,
                },
                None => None,
            };
            let id = self.recorder.invoke(process, op.clone());
            let (kind, result) = match tokio::time::timeout(self.timeout, self.call(&op, coupon_id))
                .await
            {
                Ok(Ok(r)) => (EventKind::Ok, Some(r)),
                Ok(Err(e)) => match Refusal::from_code(e.code()).filter(|_| !e.outcome_unknown()) {
                    Some(r) => (EventKind::Fail, Some(OpResult::Refused(r))),
                    None => {
                        self.note(format!("p{process} {op}: {e}"));
                        (EventKind::Unknown, None)
                    }
                },
                Err(_) => {
                    self.note(format!(
                        "p{process} {op}: timed out after {:?}",
                        self.timeout
                    ));
                    (EventKind::Unknown, None)
                }
            };
            self.recorder.complete(id, kind, result);
            if kind == EventKind::Unknown {
                // Jepsen: a process that saw an unknown outcome is retired.
                process = self.pids.next();
            }
        }
    }

    fn note(&self, msg: String) {
        if let Ok(mut e) = self.errors.lock() {
            e.push(msg);
        }
    }

    async fn call(&self, op: &Op, coupon: Option<Uuid>) -> Result<OpResult, EngineError> {
        let template = match op {
            Op::Claim { template, .. } => self
                .templates
                .get(*template as usize)
                .copied()
                .unwrap_or_else(|| Uuid::nil().into()),
            _ => Uuid::nil().into(),
        };
        let (owned, id) = (op.clone(), coupon.unwrap_or_default());
        let done = match &self.engine {
            Server::Main(engine) => perform(engine.clone(), owned, template, id).await?,
            Server::Killable(process) => process
                .call(move |engine| perform(engine, owned, template, id))
                .await
                .map_err(|Killed| {
                    EngineError::Unavailable("the engine was killed; outcome unknown".into())
                })??,
        };
        Ok(match (op, done) {
            (
                Op::Claim {
                    template,
                    request_id,
                    ..
                },
                Done::Claimed(coupon_id),
            ) => {
                let reference = CouponRef {
                    template: *template,
                    request_id: request_id.clone(),
                };
                let coupon = match self.coupons.lock() {
                    Ok(mut m) => {
                        let known = m
                            .by_id
                            .entry(coupon_id)
                            .or_insert_with(|| reference.clone())
                            .clone();
                        m.by_ref.entry(reference).or_insert(coupon_id);
                        known
                    }
                    Err(_) => reference,
                };
                OpResult::Claimed { coupon }
            }
            (_, Done::Redeemed) => OpResult::Redeemed,
            (_, Done::Locked) => OpResult::Locked,
            (_, Done::Released) => OpResult::Released,
            _ => OpResult::Refunded,
        })
    }
}

/// What the engine answered, before it is put in scenario terms.
enum Done {
    Claimed(Uuid),
    Redeemed,
    Refunded,
    Locked,
    Released,
}

/// Lock TTL of every checkout in a case: longer than any case, so no lock lapses mid-case
/// (the model has no clock; lapses are tested over HTTP, `engine/tests/integration`).
const CASE_LOCK_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The amount of an order: `o2` and `o3` are small orders, below the templates' fixed
/// discount of 500, so an uncapped deduction (mall #1002) would store a negative amount to
/// pay (I13); the others are large.
fn order_amount(order_id: &str) -> i64 {
    match order_id {
        "o2" => 400,
        "o3" => 300,
        _ => 10_000,
    }
}

/// One operation on `engine` (owned, so that it can run on another engine's runtime).
async fn perform(
    engine: CouponEngine,
    op: Op,
    template: TemplateId,
    coupon: Uuid,
) -> Result<Done, EngineError> {
    match op {
        Op::Claim {
            user, request_id, ..
        } => {
            let r = engine
                .claim(
                    template,
                    &UserId::parse(&user)?,
                    &RequestId::parse(&request_id)?,
                )
                .await?;
            Ok(Done::Claimed(r.coupon_id))
        }
        Op::Redeem { user, order_id, .. } => {
            let amount = order_amount(&order_id);
            engine
                .redeem(coupon, &UserId::parse(&user)?, &order_id, amount)
                .await?;
            Ok(Done::Redeemed)
        }
        Op::Lock { user, order_id, .. } => {
            let user = UserId::parse(&user)?;
            engine
                .lock_for_order(coupon, &user, &order_id, Some(CASE_LOCK_TTL))
                .await?;
            Ok(Done::Locked)
        }
        Op::Release { user, order_id, .. } => {
            engine
                .release_order_lock(coupon, &UserId::parse(&user)?, &order_id)
                .await?;
            Ok(Done::Released)
        }
        Op::Refund { user, order_id, .. } => {
            engine
                .refund(coupon, &UserId::parse(&user)?, &order_id)
                .await?;
            Ok(Done::Refunded)
        }
    }
}

/// The final coupons of `templates` as the ack checker sees them (template = scenario index).
pub async fn final_state(
    engine: &CouponEngine,
    templates: &[TemplateId],
) -> anyhow::Result<FinalState> {
    let rows = sqlx::query(
        "SELECT c.template_id, c.claim_request_id, c.user_id, c.status, c.order_id, \
                COALESCE(array_agg(l.order_id) FILTER (WHERE l.id IS NOT NULL), '{}') AS live \
         FROM user_coupon c LEFT JOIN coupon_use_log l ON l.coupon_id = c.id AND NOT l.undone \
         WHERE c.template_id = ANY($1) GROUP BY c.id",
    )
    .bind(templates)
    .fetch_all(engine.pool())
    .await?;
    let mut coupons = Vec::with_capacity(rows.len());
    for r in rows {
        let template_id: TemplateId = r.try_get("template_id")?;
        let status: String = r.try_get("status")?;
        let order: Option<String> = r.try_get("order_id")?;
        coupons.push(FinalCoupon {
            template: templates
                .iter()
                .position(|t| *t == template_id)
                .unwrap_or_default() as u32,
            request_id: r.try_get("claim_request_id")?,
            user: r.try_get("user_id")?,
            status: match status.as_str() {
                "used" => FinalStatus::Used {
                    order: order.unwrap_or_default(),
                },
                "locked" => FinalStatus::Locked {
                    order: order.unwrap_or_default(),
                },
                "expired" => FinalStatus::Expired,
                "revoked" => FinalStatus::Revoked,
                _ => FinalStatus::Issued,
            },
            live_orders: r.try_get("live")?,
        });
    }
    Ok(FinalState {
        coupons,
        ..FinalState::default()
    })
}
