//! Setup: a server to test (in-process by default, or `--target`), the scenario's
//! templates created through the admin API, and the shoppers' tokens minted through it.

use std::sync::Arc;

use anyhow::Context;
use uuid::Uuid;

use crate::{
    api::Api,
    cli::Settings,
    own_stores::RedisChoice,
    progress::phase,
    server::{Plan, Served},
    templates::{self, TemplateInfo},
};

/// A shopper: a user id and its bearer token.
#[derive(Debug, Clone)]
pub(crate) struct Customer {
    /// The user id.
    pub id: Arc<str>,
    /// Its bearer token.
    pub token: Arc<str>,
    /// The server it sticks to with `--spread sticky` (index into the run's servers).
    pub home: usize,
}

/// Everything the load needs, and the server it runs against.
pub(crate) struct Fixture {
    /// API client (admin token inside) of the first server; the servers share the stores,
    /// so seeding and auditing through one covers all.
    pub api: Api,
    /// Base URL of every server under test, in order.
    pub bases: Vec<String>,
    /// The token redeems go through (the order service's), if the servers have one.
    pub service_token: Option<String>,
    /// Seeded templates, in plan order (the first is the scenario's main one).
    pub templates: Vec<TemplateInfo>,
    /// Shoppers with tokens.
    pub customers: Vec<Customer>,
    /// Short random tag making ids of this run unique on a shared server.
    pub run_tag: String,
    /// What was tested, for the report.
    pub target_description: String,
    /// The server(s) the run started itself, if any.
    pub server: Option<Served>,
}

/// How many admin calls run at once while seeding.
const SEED_CONCURRENCY: usize = 16;

/// Starts the run's own server(s), or names the external targets: the API of the first,
/// every base URL, the servers started, and what they are in words.
async fn reach_servers(s: &Settings) -> anyhow::Result<(Api, Vec<String>, Option<Served>, String)> {
    Ok(if s.serving.targets.is_empty() {
        phase(
            "setup",
            format!(
                "provisioning backends and starting {} (variant {})",
                match s.serving.servers {
                    Some(n) => format!("{n} coupon-server process(es)"),
                    None => "the in-process server".to_owned(),
                },
                s.serving.variant.name()
            ),
        );
        let server = Served::start(Plan {
            variant: s.serving.variant,
            persistence: s.serving.persistence,
            redis: redis_choice(s),
            processes: s.serving.servers.map(|n| (n, s.serving.server_bin.clone())),
            grey: s
                .serving
                .nemesis
                .map(|n| n.grey_plan(s.serving.servers, s.serving.pg_replication))
                .unwrap_or_default(),
        })
        .await?;
        let api = Api::new(&server.base_urls[0], &server.admin_token)?;
        let description = server.description.clone();
        (api, server.base_urls.clone(), Some(server), description)
    } else {
        let token = s
            .serving
            .admin_token
            .as_deref()
            .context("--target needs --admin-token (or COUPON_ADMIN_TOKEN)")?;
        let list = s.serving.targets.join(", ");
        phase("setup", format!("external target(s) {list}"));
        let noun = if s.serving.targets.len() == 1 {
            "server"
        } else {
            "servers"
        };
        (
            Api::new(&s.serving.targets[0], token)?,
            s.serving.targets.clone(),
            None,
            format!("external {noun} {list}"),
        )
    })
}

/// The run's templates: `--template` as it is, or the scenario's plan created now.
async fn seed_templates(
    s: &Settings,
    api: &Api,
    run_tag: &str,
) -> anyhow::Result<Vec<TemplateInfo>> {
    let mut templates = Vec::new();
    if let Some(id) = s.sale.template {
        let t = api
            .template(id)
            .await
            .with_context(|| format!("reading --template {id}"))?;
        templates.push(TemplateInfo::fetched(&t, templates::Role::Hot));
    }
    let plan = if s.sale.template.is_some() {
        Vec::new()
    } else {
        templates::plan(s, run_tag)
    };
    for (role, spec) in plan {
        let id = api
            .create_template(&spec)
            .await
            .with_context(|| format!("creating template {:?}", spec.name))?;
        templates.push(TemplateInfo::new(id, role, &spec));
    }
    Ok(templates)
}

/// Starts or reaches the server, seeds templates and mints tokens.
pub(crate) async fn prepare(s: &Settings) -> anyhow::Result<Fixture> {
    let (api, bases, server, mut target_description) = reach_servers(s).await?;
    let service_token = match &server {
        Some(served) => Some(served.service_token.clone()),
        None => s.serving.service_token.clone(),
    };
    if service_token.is_some() {
        target_description.push_str("; redeems through the order-service token");
    }
    for base in &bases {
        Api::new(base, "")?
            .wait_healthy(std::time::Duration::from_secs(10))
            .await
            .with_context(|| format!("the server {base} is not healthy"))?;
    }
    let run_tag = Uuid::new_v4().simple().to_string()[..8].to_owned();
    let templates = seed_templates(s, &api, &run_tag).await?;
    phase(
        "setup",
        format!(
            "{} template(s) created; minting {} user tokens",
            templates.len(),
            s.sale.customers
        ),
    );
    let customers = mint(&api, &run_tag, s.sale.customers, bases.len()).await?;
    phase("setup", format!("ready: {target_description}"));
    Ok(Fixture {
        api,
        bases,
        service_token,
        templates,
        customers,
        run_tag,
        target_description,
        server,
    })
}

/// The Redis the in-process server runs on: the run's own when a fault must act on it, a
/// cluster with `--redis-cluster` or when the fault is a failover.
fn redis_choice(s: &Settings) -> RedisChoice {
    match s.serving.nemesis {
        Some(kind) if kind.needs_cluster() => RedisChoice::OwnCluster,
        Some(_) => RedisChoice::Own,
        None if s.serving.redis_cluster => RedisChoice::OwnCluster,
        None => RedisChoice::Shared,
    }
}

/// The user id of shopper `n` of run `tag`.
pub(crate) fn customer_id(tag: &str, n: usize) -> String {
    format!("lt{tag}-c{n}")
}

/// Mints `count` tokens, a few at a time; shopper n's home is server n mod `servers`.
pub(crate) async fn mint(
    api: &Api,
    tag: &str,
    count: usize,
    servers: usize,
) -> anyhow::Result<Vec<Customer>> {
    let mut out: Vec<Option<Customer>> = vec![None; count];
    let mut next = 0usize;
    let mut set = tokio::task::JoinSet::new();
    while next < count || !set.is_empty() {
        while next < count && set.len() < SEED_CONCURRENCY {
            let api = api.clone();
            let id = customer_id(tag, next);
            let n = next;
            set.spawn(async move {
                let token = api.mint_token(&id).await;
                (n, id, token)
            });
            next += 1;
        }
        if let Some(joined) = set.join_next().await {
            let (n, id, token) = joined.context("minting task")?;
            let token = token.with_context(|| format!("minting the token of {id}"))?;
            out[n] = Some(Customer {
                id: id.into(),
                token: token.into(),
                home: n % servers.max(1),
            });
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn customer_ids_are_valid_user_ids() {
        let id = customer_id("0123abcd", 19_999);
        assert!(id.len() <= 64);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }
}
