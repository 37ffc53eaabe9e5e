//! Way 2 of provisioning (docs/ARCHITECTURE.md, "Provisioning"): Redis and Postgres in
//! containers via testcontainers-modules, with current image tags (not the modules' old
//! defaults). Ports are published on 127.0.0.1.

use std::time::Duration;

use testcontainers_modules::{
    postgres::Postgres,
    redis::Redis,
    testcontainers::{ImageExt, runners::AsyncRunner},
};

use crate::{Backends, Durability, ProvisionError, Way, images};

/// True if a Docker daemon socket or `DOCKER_HOST` is configured.
pub fn docker_configured() -> bool {
    std::env::var_os("DOCKER_HOST").is_some()
        || std::path::Path::new("/var/run/docker.sock").exists()
}

pub(crate) async fn start(durability: Durability) -> Result<Backends, ProvisionError> {
    if !docker_configured() {
        return Err(ProvisionError::Containers(
            "no Docker daemon (no DOCKER_HOST, no /var/run/docker.sock)".into(),
        ));
    }
    let err = |e: &dyn std::fmt::Display| ProvisionError::Containers(e.to_string());
    let redis = Redis::default()
        .with_name(images::redis_image())
        .with_tag(images::redis_tag())
        .with_startup_timeout(Duration::from_secs(60))
        .start()
        .await
        .map_err(|e| err(&e))?;
    // The module turns fsync off unless asked.
    let pg = match durability {
        Durability::Fixture => Postgres::default(),
        Durability::Flushed => Postgres::default().with_fsync_enabled(),
    };
    let pg = pg
        .with_host_auth()
        .with_name(images::postgres_image())
        .with_tag(images::postgres_tag())
        .with_startup_timeout(Duration::from_secs(120))
        .start()
        .await
        .map_err(|e| err(&e))?;
    let redis_port = redis.get_host_port_ipv4(6379).await.map_err(|e| err(&e))?;
    let pg_port = pg.get_host_port_ipv4(5432).await.map_err(|e| err(&e))?;
    Ok(Backends::assembled(
        coupon_engine::RedisTarget::Node(format!("redis://127.0.0.1:{redis_port}/")),
        format!("postgres://postgres:postgres@127.0.0.1:{pg_port}/postgres"),
        Way::Containers,
        vec![Box::new(redis), Box::new(pg)],
    ))
}
