//! Postgres side of the engine: templates, coupons, the use log and the stock outbox.
//! Every multi-statement change runs in one transaction; the conditional UPDATEs and the
//! unique indexes, not the Redis lock, are what make redeem and refund safe.
//!
//! One file per table family, so that a statement lives beside the others on its table and a
//! schema change meets every one of them in one place. Everything is re-exported here: callers
//! name `store::postgres::f`, not the file.

mod audit;
mod checkout;
mod coupons;
mod identity;
mod outbox;
mod redemptions;
mod stock;
mod templates;
#[cfg(feature = "mutants")]
mod unguarded;
mod use_log;

use time::OffsetDateTime;

pub use audit::*;
pub use checkout::*;
pub use coupons::*;
pub use identity::*;
pub use outbox::*;
pub use redemptions::*;
pub use stock::*;
pub use templates::*;
#[cfg(feature = "mutants")]
pub use unguarded::*;
pub use use_log::*;

use crate::error::{EngineError, EngineResult};

/// The embedded migrations (`migrations/` at the workspace root).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// How every pool of the engine is built (the server's and the harness's alike), with at
/// most `max_connections`.
///
/// No ping before a connection is handed out (`test_before_acquire`): it is a round trip to
/// Postgres on every acquire — in a claim batch's serial path, before its decision — and
/// sqlx pings every connection on its release anyway, dropping one that fails. A
/// connection that died idle (Postgres restarted) fails the one statement that meets it,
/// as a failure in the middle of that statement would: the caller's outcome is unknown
/// (503, retry with the same ids) and the batch is retried on another connection.
///
/// Every statement is planned for its own parameters and the table as it is now
/// (`plan_cache_mode = force_custom_plan`). Left to choose, Postgres switches a prepared
/// statement to a generic plan after five executions and keeps it for the connection's
/// life; made while `user_coupon` was analyzed empty, that plan is a sequential scan, and a
/// coupon looked up by id, a user's coupons or a claim's replay then reads the whole table
/// every time (measured: 1,429 buffers for one lookup at 100,000 coupons, against 3), until
/// autovacuum analyzes the table again — if it is on. Planning these lookups costs tens of
/// microseconds; the claim batch keeps its one generic plan (`coupon_decide_claims` sets
/// its own mode and has one index per probe, see the migrations).
///
/// Grey failures (docs/ARCHITECTURE.md, "Deadlines"): the client side of every wait is a
/// Tokio deadline of the caller's (sqlx offers no TCP keepalive or user timeout on its
/// sockets). The server side is set here, so that a client that vanished behind a partition
/// does not keep its locks: a transaction left idle is ended after
/// [`SERVER_SIDE_GIVE_UP`], and the backend's socket gives up on unacknowledged data after
/// as long (`tcp_user_timeout`) and probes an idle peer (`tcp_keepalives_*`). These are
/// safety nets far above the request deadline, not the deadline itself.
pub fn pool_options(max_connections: u32) -> sqlx::postgres::PgPoolOptions {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                let ms = SERVER_SIDE_GIVE_UP.as_millis();
                let secs = SERVER_SIDE_GIVE_UP.as_secs().max(1);
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "SET plan_cache_mode = force_custom_plan; \
                     SET idle_in_transaction_session_timeout = {ms}; \
                     SET tcp_user_timeout = {ms}; \
                     SET tcp_keepalives_idle = {secs}; \
                     SET tcp_keepalives_interval = 1; \
                     SET tcp_keepalives_count = 3"
                )))
                .execute(conn)
                .await?;
                Ok(())
            })
        })
        .after_release(|conn, _| Box::pin(outside_any_transaction(conn)))
}

/// Longest a released connection's check may take; past it the connection is closed.
const RELEASE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a connection going back to the pool is outside any transaction; one that is not
/// is closed (its server session ends, rolling the transaction back).
///
/// sqlx 0.9 leaves a session inside a transaction when a `BEGIN` is cancelled in flight (a
/// deadline that fires while Postgres is slow or paused): it counts the transaction only
/// once `BEGIN` has answered, so nothing rolls it back, and its release check does not read
/// the transaction status Postgres reports (transact-rs/sqlx#4393, fixed upstream after
/// 0.9.0). The next borrower's statements then run inside that transaction and are never
/// committed — a claim batch, decided in autocommit as it thinks, answered `stored` and then
/// lost with the session: the likeliest account of the one acknowledged claim the property
/// tests lost under a paused Postgres (I6, `correct_grey_faults`, not replayable). The check: a statement sent alone (the simple protocol) outside any
/// transaction starts its own, so `now()` (the transaction's start) equals
/// `statement_timestamp()`; inside a transaction begun earlier it does not. (Through the
/// extended protocol the two differ even in autocommit: the statement's clock restarts at
/// its Execute.)
async fn outside_any_transaction(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    let check = async {
        let row = sqlx::raw_sql("SELECT now() = statement_timestamp()")
            .fetch_one(&mut *conn)
            .await?;
        sqlx::Row::try_get::<bool, _>(&row, 0)
    };
    match tokio::time::timeout(RELEASE_CHECK, check).await {
        Ok(Ok(true)) => Ok(true),
        Ok(Ok(false)) => {
            tracing::warn!("a pooled connection was left inside a transaction; closing it");
            Ok(false)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Ok(false),
    }
}

/// How long Postgres keeps a session whose client went silent mid-transaction before it
/// ends it (and releases its row locks): see [`pool_options`].
pub const SERVER_SIDE_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(10);

fn corrupt(what: &str) -> EngineError {
    EngineError::Database(sqlx::Error::Protocol(format!(
        "unexpected stored value: {what}"
    )))
}

/// Milliseconds since the Unix epoch to a timestamp (clamped to now on overflow).
pub fn ms_to_time(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or_else(|_| OffsetDateTime::now_utc())
}

/// True if `err` is a unique violation of the named constraint or index.
pub fn is_unique_violation(err: &sqlx::Error, constraint: &str) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.code().as_deref() == Some("23505") && db.constraint() == Some(constraint)
        }
        _ => false,
    }
}

/// `synchronous_commit` and `fsync` as this pool's connections see them.
pub async fn durability_settings(pool: &sqlx::PgPool) -> EngineResult<(String, String)> {
    Ok(
        sqlx::query_as("SELECT current_setting('synchronous_commit'), current_setting('fsync')")
            .fetch_one(pool)
            .await?,
    )
}

/// The standbys this primary streams to without waiting for them (`sync_state = async`),
/// by application name and address.
pub async fn asynchronous_standbys(pool: &sqlx::PgPool) -> EngineResult<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT application_name || coalesce(' (' || host(client_addr) || ')', '') \
         FROM pg_stat_replication WHERE sync_state = 'async' ORDER BY 1",
    )
    .fetch_all(pool)
    .await?)
}

/// Round trip to Postgres.
pub async fn ping(pool: &sqlx::PgPool) -> EngineResult<()> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}
