//! The open model: shoppers arrive on a schedule (`--arrival-rate`, `--arrival-profile`)
//! whether or not the server keeps up, as at a flash sale's second zero. Each arrival runs
//! one iteration of the scenario (the same journeys, records and audits as the closed
//! model) on a free virtual user; at most `--max-in-flight` run at once (k6's `maxVUs`),
//! and an arrival that finds none free is dropped and counted, never silently skipped.
//!
//! Latency is taken from each arrival's intended start (response time: what a shopper
//! waits, queueing included, so a slow server cannot slow the load that measures it) and
//! from its actual start (service time: what a closed loop would report). Both go into
//! HdrHistograms. Arrivals due within the same timer tick (1 ms) start together.

mod table;

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::{sync::Notify, time::Instant};

pub(crate) use crate::profile::Profile;

use crate::{
    attack::AttackResult,
    lean_client::Endpoint,
    progress::phase,
    scenarios::{self, Ctx, LeanUser, Session},
    tally::Latencies,
};

/// The dispatcher counts as unable to keep to the schedule (the generator, not the server,
/// is the limit) when its own lag behind the schedule reaches this at the 99th percentile.
const GENERATOR_LAG_LIMIT_MS: f64 = 10.0;

/// Percentiles of one latency, ms.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    #[serde(default)]
    pub p95: f64,
    pub p99: f64,
    #[serde(default)]
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    fn of(l: &Latencies) -> Self {
        Self {
            p50: l.percentile_ms(50.0),
            p90: l.percentile_ms(90.0),
            p95: l.percentile_ms(95.0),
            p99: l.percentile_ms(99.0),
            p999: l.percentile_ms(99.9),
            max: l.max_ms(),
        }
    }
}

/// What an open-model run did, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OpenFigures {
    /// The profile's stages (a constant rate is one stage).
    pub profile: String,
    /// Arrivals a second the profile asks for on average, and at its peak.
    pub asked_per_sec: f64,
    pub peak_per_sec: f64,
    /// Arrivals scheduled, started and dropped (no free virtual user).
    pub scheduled: u64,
    pub started: u64,
    pub dropped: u64,
    /// Arrivals started a second, over the profile's length.
    pub achieved_per_sec: f64,
    /// The bound on arrivals in flight, and the most that were.
    pub max_in_flight: usize,
    pub peak_in_flight: usize,
    /// From each arrival's intended start to the end of its iteration.
    pub response_ms: Percentiles,
    /// From its actual start to the end of its iteration.
    pub service_ms: Percentiles,
    /// How late the dispatcher started arrivals it had a virtual user for.
    pub dispatch_lag_ms: Percentiles,
    /// The closed loop run after the arrivals for comparison (`--compare-closed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<ClosedFigures>,
    /// The dispatcher itself fell behind the schedule: the asked rate was beyond what this
    /// generator makes on this machine, and the figures do not measure the server alone.
    pub generator_limited: bool,
}

/// A closed loop run after the arrivals on the same sale (`--compare-closed USERS`), for
/// the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClosedFigures {
    /// Virtual users, each starting its next visit as soon as the last one ended.
    pub users: usize,
    /// Visits completed, and a second.
    pub visits: u64,
    pub per_sec: f64,
    /// Each visit's time (intended and actual start are one in a closed loop).
    pub visit_ms: Percentiles,
}

/// Makes visit `n` shopper n's (shoppers in turn, as Goose user n mod users in its
/// iteration n / users would be): its ids are unique across both phases, and every
/// shopper comes, not only those of the few virtual users a fast server keeps reusing.
fn number_visit(session: &mut Session, n: u64, users: usize) {
    session.idx = (n % users as u64) as usize;
    session.iter = n / users as u64;
}

/// The servers' endpoints for the lean client.
fn endpoints(ctx: &Ctx) -> anyhow::Result<Vec<Endpoint>> {
    ctx.lean
        .clone()
        .context("the open model's client speaks to servers at http://<ip>:<port> only")
}

/// `users` virtual users in a closed loop for `length`, on the same client, scenario,
/// records and audit as the arrivals; visits are numbered from `next` on.
pub(crate) async fn closed_loop(
    ctx: Arc<Ctx>,
    users: usize,
    length: Duration,
    next: Arc<AtomicU64>,
) -> anyhow::Result<ClosedFigures> {
    let endpoints = endpoints(&ctx)?;
    phase(
        "run",
        format!(
            "closed model after the arrivals, for comparison: {users} virtual users in a loop \
             for {:.1} s",
            length.as_secs_f64()
        ),
    );
    let started = Instant::now();
    let end = started + length;
    let mut workers = tokio::task::JoinSet::new();
    for i in 0..users {
        let (ctx, next) = (ctx.clone(), next.clone());
        let mut user = LeanUser::new(&endpoints);
        let mut session = Session::new(ctx.seed, i);
        workers.spawn(async move {
            let mut times = Latencies::new(3);
            while Instant::now() < end {
                number_visit(&mut session, next.fetch_add(1, Ordering::SeqCst), ctx.users);
                let sent = Instant::now();
                let _ = scenarios::iteration(&mut user, &ctx, &mut session).await;
                times.record(sent.elapsed().as_micros() as u64);
            }
            times
        });
    }
    let mut all = Latencies::new(3);
    while let Some(times) = workers.join_next().await {
        all.add(&times.context("a closed-loop worker")?);
    }
    let secs = started.elapsed().as_secs_f64();
    let figures = ClosedFigures {
        users,
        visits: all.count(),
        per_sec: all.count() as f64 / secs,
        visit_ms: Percentiles::of(&all),
    };
    phase(
        "run",
        format!(
            "closed model: {} visits ({:.0}/s), p99 {:.1} ms",
            figures.visits, figures.per_sec, figures.visit_ms.p99
        ),
    );
    Ok(figures)
}

/// The latencies every arrival adds to.
struct Clocks {
    response: Latencies,
    service: Latencies,
}

/// Runs `profile` against the servers of `ctx`.
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    profile: &Profile,
    profile_text: &str,
    max_in_flight: usize,
    next: Arc<AtomicU64>,
) -> anyhow::Result<(AttackResult, OpenFigures)> {
    let endpoints = endpoints(&ctx)?;
    let idle: Arc<Mutex<Vec<(LeanUser, Session)>>> = Arc::new(Mutex::new(
        (0..max_in_flight)
            .map(|i| (LeanUser::new(&endpoints), Session::new(ctx.seed, i)))
            .collect(),
    ));
    let clocks = Arc::new(Mutex::new(Clocks {
        response: Latencies::new(3),
        service: Latencies::new(3),
    }));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let all_back = Arc::new(Notify::new());
    let mut lag = Latencies::new(3);
    let (mut scheduled, mut dropped, mut peak_in_flight) = (0u64, 0u64, 0usize);
    phase(
        "run",
        format!(
            "open model: {profile_text} ({:.0} arrivals over {:.1} s, at most {max_in_flight} \
             in flight)",
            profile.expected(),
            profile.length().as_secs_f64()
        ),
    );
    let started_at = Instant::now();
    let epoch = ctx.epoch.max(started_at);
    for offset in profile.schedule() {
        let due = epoch + offset;
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        scheduled += 1;
        let Some((mut user, mut session)) =
            idle.lock().unwrap_or_else(PoisonError::into_inner).pop()
        else {
            dropped += 1;
            continue;
        };
        number_visit(&mut session, next.fetch_add(1, Ordering::SeqCst), ctx.users);
        let now = Instant::now();
        lag.record(now.saturating_duration_since(due).as_micros() as u64);
        peak_in_flight = peak_in_flight.max(in_flight.fetch_add(1, Ordering::SeqCst) + 1);
        let (ctx, idle, clocks) = (ctx.clone(), idle.clone(), clocks.clone());
        let (in_flight, all_back) = (in_flight.clone(), all_back.clone());
        tokio::spawn(async move {
            let sent = Instant::now();
            // A Goose-level error (none is raised by this transport) ends the iteration
            // like any other answer: its requests are already recorded.
            let _ = scenarios::iteration(&mut user, &ctx, &mut session).await;
            let done = Instant::now();
            {
                let mut c = clocks.lock().unwrap_or_else(PoisonError::into_inner);
                c.response
                    .record(done.saturating_duration_since(due).as_micros() as u64);
                c.service
                    .record(done.saturating_duration_since(sent).as_micros() as u64);
            }
            idle.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((user, session));
            if in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
                all_back.notify_one();
            }
        });
    }
    while in_flight.load(Ordering::SeqCst) > 0 {
        // notify_one keeps a permit, so a last return between the check and the wait is
        // not missed.
        all_back.notified().await;
    }
    let elapsed = started_at.elapsed();
    let length = profile.length().as_secs_f64();
    let clocks = clocks.lock().unwrap_or_else(PoisonError::into_inner);
    let started = scheduled - dropped;
    let dispatch_lag_ms = Percentiles::of(&lag);
    let figures = OpenFigures {
        profile: profile_text.to_owned(),
        asked_per_sec: profile.expected() / length,
        peak_per_sec: profile.peak(),
        scheduled,
        started,
        dropped,
        achieved_per_sec: started as f64 / length,
        max_in_flight,
        peak_in_flight,
        response_ms: Percentiles::of(&clocks.response),
        service_ms: Percentiles::of(&clocks.service),
        dispatch_lag_ms,
        closed: None,
        generator_limited: dispatch_lag_ms.p99 >= GENERATOR_LAG_LIMIT_MS,
    };
    phase(
        "run",
        format!(
            "open model: {started} of {scheduled} arrivals started ({dropped} dropped), \
             response p99 {:.1} ms, service p99 {:.1} ms{}",
            figures.response_ms.p99,
            figures.service_ms.p99,
            if figures.generator_limited {
                " — the generator could not keep to the schedule"
            } else {
                ""
            }
        ),
    );
    let attack = AttackResult {
        thresholds: Vec::new(),
        goose_reports: Vec::new(),
        elapsed: Duration::from_secs_f64(elapsed.as_secs_f64()),
    };
    Ok((attack, figures))
}
