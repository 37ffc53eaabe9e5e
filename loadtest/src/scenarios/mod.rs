//! The Goose scenarios and what they share: the run context (templates, shoppers, the
//! acknowledgement log) and each Goose user's session (its RNG and iteration count).

mod call;
mod checkout;
mod flash_sale;
mod lean;
mod lifecycle;
mod mixed;
mod ops;
mod restock;
mod servers;

pub(crate) use call::Transport;
pub(crate) use lean::LeanUser;
pub(crate) use restock::{ServerRestock, probe as probe_restock};
pub(crate) use servers::Servers;

use std::{sync::Arc, time::Duration};

use goose::prelude::*;
use tokio::time::Instant;

use crate::{
    acks::AckLog,
    cli::{ScenarioKind, Settings},
    rng::Rng,
    setup::Customer,
    templates::{Role, TemplateInfo},
};

/// What every Goose user of a run shares.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The scenario.
    pub kind: ScenarioKind,
    /// Seeded templates.
    pub templates: Vec<TemplateInfo>,
    /// Shoppers; Goose user `i` acts as shoppers `i`, `i + users`, `i + 2·users`, …
    pub customers: Vec<Customer>,
    /// Every answer seen.
    pub acks: AckLog,
    /// The servers under test and how requests are shared among them.
    pub servers: Servers,
    /// The servers for the lean client (None when one is not `http://<ip>:<port>`: Goose
    /// users then send through reqwest).
    pub lean: Option<Vec<crate::lean_client::Endpoint>>,
    /// The order service's token: when set, redeems go through it, naming the shopper.
    pub service_token: Option<Arc<str>>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after an unknown outcome.
    pub max_retries: u32,
    /// Fraction of deliberate duplicates.
    pub duplicate_rate: f64,
    /// RNG seed.
    pub seed: u64,
    /// Unique tag of this run's ids.
    pub tag: String,
    /// Number of Goose users.
    pub users: usize,
    /// Checkout: coupons offered for other Goose users' orders (mall #1003's race).
    pub offered: checkout::Offered,
    /// The hot templates' ids (several with `--templates`), found once: a visit picks one.
    pub hot: Vec<uuid::Uuid>,
    /// When the load began (event times count from here).
    pub epoch: Instant,
    /// The same moment by the wall clock, Unix microseconds (to line up runs from several
    /// machines when their records are merged).
    pub epoch_unix_us: u64,
}

/// A granted claim to send again later, as a client's retry that arrives late.
#[derive(Debug, Clone)]
pub(crate) struct LateRetry {
    /// The visit (iteration) it is due at.
    pub due: u64,
    /// Its shopper's index.
    pub shopper: usize,
    /// Its template.
    pub template: uuid::Uuid,
    /// Its request id.
    pub request_id: String,
}

/// One Goose user's own state, kept in Goose session data.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Goose user index.
    pub idx: usize,
    /// Its random choices.
    pub rng: Rng,
    /// Iterations done.
    pub iter: u64,
    /// A granted claim (its shopper's index and request id) to be sent again on a later
    /// visit (the iteration given), as a client's retry that arrives late: after the sale
    /// sold out, mostly.
    pub late_retry: Option<LateRetry>,
}

impl Ctx {
    /// The context of a run.
    pub(crate) fn new(
        s: &Settings,
        templates: Vec<TemplateInfo>,
        customers: Vec<Customer>,
        tag: String,
        bases: Vec<String>,
    ) -> Self {
        let hot = templates
            .iter()
            .filter(|t| t.role == Role::Hot)
            .map(|t| t.id)
            .collect();
        Self {
            kind: s.scenario,
            templates,
            customers,
            acks: AckLog::default(),
            lean: bases
                .iter()
                .map(|b| crate::lean_client::Endpoint::parse(b))
                .collect::<anyhow::Result<Vec<_>>>()
                .ok(),
            servers: Servers::new(bases, s.serving.spread),
            service_token: None,
            timeout: s.load.request_timeout,
            max_retries: s.load.max_retries,
            duplicate_rate: s.load.duplicate_rate,
            seed: s.load.seed,
            tag,
            users: s.load.users,
            offered: checkout::Offered::default(),
            hot,
            epoch: Instant::now(),
            epoch_unix_us: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
        }
    }

    /// Microseconds from the start of the load to `t`.
    pub(crate) fn micros_since_start(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// The hot template of a shopper's visit: with several sales at once (`--templates`),
    /// each visit of the run the next one in turn.
    pub(crate) fn hot_template(&self, idx: usize, iter: u64) -> uuid::Uuid {
        match self.hot.len() {
            0 | 1 => self.template(Role::Hot).id,
            n => self.hot[(idx + iter as usize * self.users) % n],
        }
    }

    /// The template with `role` (the first one if none has it).
    pub(crate) fn template(&self, role: Role) -> &TemplateInfo {
        self.templates
            .iter()
            .find(|t| t.role == role)
            .unwrap_or(&self.templates[0])
    }

    /// The shopper Goose user `idx` acts as in iteration `iter` (its own shoppers in turn).
    pub(crate) fn customer(&self, idx: usize, iter: u64) -> (usize, &Customer) {
        let total = self.customers.len();
        let owned = total.saturating_sub(idx).div_ceil(self.users).max(1);
        let n = (idx + (iter as usize % owned) * self.users) % total;
        (n, &self.customers[n])
    }

    /// Some shopper other than shopper `n`.
    pub(crate) fn intruder(&self, n: usize, rng: &mut Rng) -> &Customer {
        let total = self.customers.len();
        let offset = 1 + rng.range(0, total as i64 - 1) as usize;
        &self.customers[(n + offset) % total]
    }
}

impl Session {
    /// The session of user (or open-model virtual user) `idx`.
    pub(crate) fn new(seed: u64, idx: usize) -> Self {
        Self {
            idx,
            rng: Rng::new(seed, idx as u64),
            iter: 0,
            late_retry: None,
        }
    }
}

/// One iteration of `ctx.kind`'s scenario: one shopper's visit, by whoever sends it.
pub(crate) async fn iteration(
    user: &mut impl Transport,
    ctx: &Ctx,
    session: &mut Session,
) -> TransactionResult {
    match ctx.kind {
        ScenarioKind::FlashSale => flash_sale::iteration(user, ctx, session).await,
        ScenarioKind::Lifecycle => lifecycle::iteration(user, ctx, session).await,
        ScenarioKind::Mixed => mixed::iteration(user, ctx, session).await,
        ScenarioKind::Checkout => checkout::iteration(user, ctx, session).await,
    }
}

/// A Goose user's own state: its session and its lean connections (taken out for an
/// iteration, put back after).
#[derive(Default, Clone)]
struct GooseSession {
    state: Option<(Session, Option<LeanUser>)>,
}

/// The Goose scenario of `ctx.kind`: one transaction per iteration. Goose schedules the
/// users and keeps its metrics; the requests go over each user's lean connections when the
/// servers allow it (see `lean`), through reqwest otherwise.
pub(crate) fn scenario(ctx: Arc<Ctx>) -> Scenario {
    let kind = ctx.kind;
    let body: TransactionFunction = Arc::new(move |user| {
        let ctx = ctx.clone();
        Box::pin(async move {
            let idx = user.weighted_users_index;
            let taken = user
                .get_session_data_mut::<GooseSession>()
                .and_then(|g| g.state.take());
            let (mut session, mut lean) = taken.unwrap_or_else(|| {
                (
                    Session::new(ctx.seed, idx),
                    ctx.lean.as_deref().map(LeanUser::new),
                )
            });
            let result = match &mut lean {
                Some(lean) => {
                    let mut transport = lean::GooseLean {
                        user: &mut *user,
                        lean,
                    };
                    iteration(&mut transport, &ctx, &mut session).await
                }
                None => iteration(&mut *user, &ctx, &mut session).await,
            };
            session.iter += 1;
            let state = Some((session, lean));
            match user.get_session_data_mut::<GooseSession>() {
                Some(g) => g.state = state,
                None => user.set_session_data(GooseSession { state }),
            }
            result
        })
    });
    Scenario::new(kind.name()).register_transaction(Transaction::new(body).set_name(kind.name()))
}
