//! A scenario's options resolved into its [`Settings`]: the scenario's defaults filled in,
//! every bound and combination checked (a bad option changes nothing and says why).

use std::time::Duration;

use anyhow::{Context, bail};
use coupon_engine::{Persistence, Variant};

use super::{
    Cli, ScenarioKind,
    settings::{Gate, LoadShape, OpenModel, ReportOut, Sale, Serving, Settings, Tolerances},
};

/// Most `coupon-server` processes one run starts (each holds a Postgres pool).
const MAX_SERVERS: usize = 16;

/// Most shoppers minted by default.
const MAX_DEFAULT_CUSTOMERS: usize = 20_000;

/// The sizes of a run, resolved.
struct Sizes {
    users: usize,
    stock: i64,
    per_user_limit: i32,
    customers: usize,
}

impl Cli {
    /// Resolves defaults and validates combinations.
    pub(crate) fn settings(self) -> anyhow::Result<Settings> {
        let kind = self.scenario;
        let Sizes {
            users,
            stock,
            per_user_limit,
            customers,
        } = self.sizes()?;
        let increase_rate = self.increase_rate.unwrap_or(users as f64);
        if !(increase_rate.is_finite() && increase_rate > 0.0) {
            bail!("--increase-rate must be a positive number");
        }
        let duration = self.run_length()?;
        let open = self.open_model(duration)?;
        let duration = open
            .as_ref()
            .map_or(duration, |o| Some(o.profile.length().as_secs().max(1)));
        self.check_targets()?;
        self.check_tuning()?;
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed)
        });
        Ok(Settings {
            scenario: kind,
            load: LoadShape {
                users,
                increase_rate,
                duration,
                iterations: self.iterations,
                open,
                request_timeout: Duration::from_secs(self.request_timeout),
                max_retries: self.max_retries,
                duplicate_rate: self.duplicate_rate,
                seed,
            },
            sale: Sale {
                stock,
                templates: self.templates,
                per_user_limit,
                customers,
                template: self.template,
            },
            serving: Serving {
                variant: self.mutant,
                persistence: self.persistence,
                nemesis: self.nemesis,
                pg_replication: self.pg_replication,
                redis_cluster: self.redis_cluster,
                targets: self
                    .targets
                    .iter()
                    .map(|t| t.trim_end_matches('/').to_owned())
                    .collect(),
                servers: self.servers,
                server_bin: self.server_bin,
                spread: self.spread,
                service_token: self.service_token,
                admin_token: self.admin_token,
            },
            gate: Gate {
                no_audit: self.no_audit,
                restock_within: (self.restock_within_ms > 0)
                    .then(|| Duration::from_millis(self.restock_within_ms)),
                baseline: self.baseline,
                thresholds: self.thresholds,
                tolerances: Tolerances {
                    throughput: self.tolerance_throughput,
                    latency: self.tolerance_latency,
                    latency_floor_ms: self.latency_floor_ms,
                },
            },
            report: ReportOut {
                report_dir: self.report_dir,
                goose_quiet: self.goose_quiet,
            },
        })
    }

    /// The open model's arrivals, if asked for, checked.
    fn open_model(&self, duration: Option<u64>) -> anyhow::Result<Option<OpenModel>> {
        let (profile, text) = match (self.arrival_rate, &self.arrival_profile) {
            (None, None) if self.compare_closed.is_some() => {
                bail!(
                    "--compare-closed compares with an open-model run: add --arrival-rate or --arrival-profile"
                )
            }
            (None, None) => return Ok(None),
            (Some(rate), _) => {
                let secs = duration.unwrap_or(20);
                let profile = crate::profile::Profile::constant(rate, Duration::from_secs(secs))?;
                (profile, format!("{rate}/s for {secs} s"))
            }
            (None, Some(text)) => (crate::profile::Profile::parse(text)?, text.clone()),
        };
        if !self.thresholds.is_empty() {
            bail!(
                "--threshold is Goose's and applies to the closed model; an open-model run \
                 reports its response-time percentiles instead"
            );
        }
        for t in &self.targets {
            crate::lean_client::Endpoint::parse(t.trim_end_matches('/')).with_context(|| {
                format!("--target {t}: the open model's client needs http://<ip>:<port>")
            })?;
        }
        if self
            .compare_closed
            .is_some_and(|n| !(1..=100_000).contains(&n))
        {
            bail!("--compare-closed must be between 1 and 100000 users");
        }
        Ok(Some(OpenModel {
            profile,
            text,
            max_in_flight: self.max_in_flight,
            compare_closed: self.compare_closed,
        }))
    }

    /// Users, stock, per-user limit and shoppers: the scenario's defaults, checked.
    fn sizes(&self) -> anyhow::Result<Sizes> {
        let kind = self.scenario;
        let open = self.arrival_rate.is_some() || self.arrival_profile.is_some();
        if open && !(1..=100_000).contains(&self.max_in_flight) {
            bail!("--max-in-flight must be between 1 and 100000");
        }
        let users = self
            .users
            .or(open.then_some(self.max_in_flight))
            .unwrap_or(match kind {
                ScenarioKind::FlashSale => 200,
                ScenarioKind::Lifecycle | ScenarioKind::Checkout => 50,
                ScenarioKind::Mixed => 100,
            });
        if users == 0 {
            bail!("--users must be at least 1");
        }
        let stock = self.stock.unwrap_or(match kind {
            ScenarioKind::FlashSale => 500,
            ScenarioKind::Lifecycle | ScenarioKind::Checkout => 1_000_000,
            ScenarioKind::Mixed => 200,
        });
        if !(1..=1_000_000_000).contains(&stock) {
            bail!("--stock must be between 1 and 1000000000");
        }
        if !(1..=100_000).contains(&self.templates) {
            bail!("--templates must be between 1 and 100000");
        }
        if self.templates > 1 && (kind != ScenarioKind::FlashSale || self.template.is_some()) {
            bail!("--templates applies to flash-sale runs that create their templates");
        }
        let per_user_limit = self.per_user_limit.unwrap_or(match kind {
            ScenarioKind::FlashSale | ScenarioKind::Mixed => 1,
            ScenarioKind::Lifecycle | ScenarioKind::Checkout => 10_000,
        });
        if !(1..=10_000).contains(&per_user_limit) {
            bail!("--per-user-limit must be between 1 and 10000");
        }
        let customers = match self.customers {
            Some(n) => n,
            None => match kind {
                ScenarioKind::FlashSale => {
                    // Every sale's stock twice over (with --templates, all of them).
                    let want = usize::try_from(stock)
                        .unwrap_or(usize::MAX)
                        .saturating_mul(self.templates.max(1))
                        .saturating_mul(2)
                        .saturating_add(users);
                    want.min(MAX_DEFAULT_CUSTOMERS.max(users))
                }
                ScenarioKind::Lifecycle | ScenarioKind::Checkout => users * 4,
                ScenarioKind::Mixed => users * 8,
            },
        };
        if customers < users || customers < 2 {
            bail!("--customers must be at least --users and at least 2 (got {customers})");
        }
        Ok(Sizes {
            users,
            stock,
            per_user_limit,
            customers,
        })
    }

    /// How long the attack runs: `--duration` seconds, or `--iterations` per user.
    fn run_length(&self) -> anyhow::Result<Option<u64>> {
        let duration = match (self.duration, self.iterations) {
            (Some(0), _) => bail!("--duration must be at least 1 second"),
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(20),
        };
        if self.iterations == Some(0) {
            bail!("--iterations must be at least 1");
        }
        Ok(duration)
    }

    /// The options that need the in-process server, refused with `--target`, and the
    /// targets' form.
    fn check_targets(&self) -> anyhow::Result<()> {
        let kind = self.scenario;
        if !self.targets.is_empty() {
            if self.mutant != Variant::Correct {
                bail!("--mutant applies to the in-process server only, not to --target");
            }
            if self.persistence != Persistence::Sync {
                bail!("--persistence applies to the in-process server only, not to --target");
            }
            if self.nemesis.is_some() {
                bail!(
                    "--nemesis needs the in-process server (it restarts the run's own Redis), not --target"
                );
            }
            if self.redis_cluster {
                bail!("--redis-cluster applies to the in-process server only, not to --target");
            }
        }
        if self.pg_replication != crate::nemesis::PgReplication::Sync
            && self.nemesis != Some(crate::nemesis::NemesisKind::PgFailover)
        {
            bail!("--pg-replication applies to --nemesis pg-failover only");
        }
        if self.redis_cluster && self.nemesis.is_some_and(|n| !n.needs_cluster()) {
            bail!(
                "--nemesis {} acts on one redis-server and Postgres of the run's own: not with --redis-cluster",
                self.nemesis.map(|n| n.name()).unwrap_or_default()
            );
        }
        if let Some(n) = self.nemesis
            && n.needs_servers()
            && self.servers.is_none_or(|count| count < 2)
        {
            bail!(
                "--nemesis {} acts on coupon-server processes and needs --servers N with N >= 2 \
                 (one is faulted while the others serve)",
                n.name()
            );
        }
        for t in &self.targets {
            if !(t.starts_with("http://") || t.starts_with("https://")) {
                bail!("--target must be an http:// or https:// URL, not {t:?}");
            }
        }
        if self.template.is_some() && kind != ScenarioKind::FlashSale {
            bail!(
                "--template drives the hot template of flash-sale; other scenarios seed their own"
            );
        }
        Ok(())
    }

    /// Server count, tolerances, rates, timeouts and Goose threshold rules.
    fn check_tuning(&self) -> anyhow::Result<()> {
        if let Some(n) = self.servers
            && !(1..=MAX_SERVERS).contains(&n)
        {
            bail!("--servers must be between 1 and {MAX_SERVERS}");
        }
        if !(self.tolerance_throughput > 0.0 && self.tolerance_throughput <= 1.0) {
            bail!("--tolerance-throughput must be in (0, 1]");
        }
        if self.tolerance_latency < 1.0 {
            bail!("--tolerance-latency must be at least 1.0");
        }
        if !(0.0..=1.0).contains(&self.duplicate_rate) {
            bail!("--duplicate-rate must be in [0, 1]");
        }
        if self.request_timeout == 0 {
            bail!("--request-timeout must be at least 1 second");
        }
        for rule in &self.thresholds {
            rule.parse::<goose::threshold::Threshold>()
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("--threshold {rule:?}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Spread, parse_run};

    fn parse(args: &[&str]) -> anyhow::Result<Settings> {
        let mut all = vec!["coupon-loadtest"];
        all.extend_from_slice(args);
        parse_run(all)
    }

    #[test]
    fn defaults_make_a_flash_sale() -> anyhow::Result<()> {
        let s = parse(&["flash-sale"])?;
        assert_eq!(
            (s.load.users, s.sale.stock, s.sale.per_user_limit),
            (200, 500, 1)
        );
        assert_eq!(s.load.duration, Some(20));
        assert_eq!(s.sale.customers, 1200);
        assert!(
            s.sale.customers as i64 > s.sale.stock,
            "demand must exceed stock"
        );
        Ok(())
    }

    #[test]
    fn iterations_replace_duration() -> anyhow::Result<()> {
        let s = parse(&["lifecycle", "--iterations", "3"])?;
        assert_eq!((s.load.duration, s.load.iterations), (None, Some(3)));
        assert!(parse(&["lifecycle", "--iterations", "3", "--duration", "5"]).is_err());
        Ok(())
    }

    #[test]
    fn alias_and_bad_values() {
        assert!(parse(&["claim-redeem-refund"]).is_ok());
        assert!(parse(&["flash-sale", "--mutant", "d99"]).is_err());
        assert!(parse(&["flash-sale", "--threshold", "p100<1s"]).is_err());
        assert!(parse(&["flash-sale", "--users", "0"]).is_err());
    }

    #[test]
    fn several_servers() -> anyhow::Result<()> {
        let s = parse(&[
            "flash-sale",
            "--target",
            "http://a:1/",
            "--target",
            "http://b:2",
            "--admin-token",
            "t",
            "--spread",
            "request",
        ])?;
        assert_eq!(s.serving.targets, ["http://a:1", "http://b:2"]);
        assert_eq!(s.serving.spread, Spread::Request);
        let s = parse(&["flash-sale", "--servers", "3", "--mutant", "d1"])?;
        assert_eq!(
            (s.serving.servers, s.serving.spread),
            (Some(3), Spread::Sticky)
        );
        assert!(parse(&["flash-sale", "--servers", "0"]).is_err());
        assert_eq!(
            parse(&["flash-sale", "--templates", "1000"])?
                .sale
                .templates,
            1000
        );
        assert!(parse(&["flash-sale", "--templates", "0"]).is_err());
        assert!(parse(&["lifecycle", "--templates", "2"]).is_err());
        assert!(parse(&["flash-sale", "--servers", "2", "--target", "http://a:1"]).is_err());
        assert!(parse(&["flash-sale", "--server-bin", "x"]).is_err());
        let id = "7f1b3c1e-1a2b-4c3d-8e4f-0123456789ab";
        assert!(
            parse(&[
                "lifecycle",
                "--target",
                "http://a:1",
                "--admin-token",
                "t",
                "--template",
                id
            ])
            .is_err()
        );
        assert!(
            parse(&["flash-sale", "--template", id]).is_err(),
            "needs --target"
        );
        assert!(parse(&["lifecycle", "--service-token", "s"]).is_err());
        Ok(())
    }
}
