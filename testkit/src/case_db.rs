//! The database of one test environment: a copy of the migrated template, taken from a
//! small set of slots per template and emptied for each new holder, instead of a database
//! created and dropped per test.
//!
//! Why: on a busy 2-core machine a `CREATE DATABASE … TEMPLATE` writes the template's ~8 MB
//! of catalogs through the WAL (~0.2–0.35 s) and its `DROP DATABASE` takes as long again,
//! which was most of a property case's time. Emptying a slot's tables is ~10 ms.
//!
//! A slot is held through a session-level advisory lock on a connection the holder keeps
//! open, so a slot is never shared, across processes too, and a crashed holder frees its
//! slot. The next holder ends any connection a previous holder left on it, then empties it
//! (rows deleted, sequences put back where the template has them) — or, when the slot no
//! longer looks like the template (a run added tables, or grew it by more than
//! [`REUSE_GROWTH`]), copies the template again. Emptied at claim, never at release:
//! whatever a killed holder left is still removed. The lock lives as long as the holder's
//! connection: a fault that ends that connection (a crash of the Postgres it is on) frees the
//! slot while it is in use, so tests that crash Postgres do it on a Postgres of their own,
//! where no other environment is waiting for a slot.

use sqlx::{Connection, Executor, PgConnection};

use crate::ProvisionError;

/// Most slots of one template (concurrent environments on one server).
const MAX_SLOTS: u32 = 64;
/// A slot that grew by more than this over its template is copied again, not emptied: a
/// bench or load run's bloat would otherwise be the next run's starting point.
const REUSE_GROWTH: i64 = 16 << 20;

/// What a slot must still match to be reused: its relations, functions and triggers.
const SHAPE: &str = "SELECT md5(coalesce(string_agg(x, ',' ORDER BY x), '')) FROM (
    SELECT c.relkind::text || ':' || c.relname FROM pg_class c
     WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL
    SELECT 'f:' || p.proname || ':' || md5(p.prosrc) FROM pg_proc p
     WHERE p.pronamespace = 'public'::regnamespace
    UNION ALL
    SELECT 't:' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
) AS shape(x)";

/// What a fresh copy of the template looks like, stored as the template database's comment
/// when it is built: its shape, and where each of its sequences stands (a migration may
/// have advanced one, so "restarted" is not "as in a copy").
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TemplateRecord {
    shape: String,
    /// (name, value, is_called), as `setval` takes them.
    sequences: Vec<(String, i64, bool)>,
}

impl TemplateRecord {
    /// The record of the database `conn` is connected to.
    pub(crate) async fn of(conn: &mut PgConnection) -> Result<Self, ProvisionError> {
        let shape = sqlx::query_scalar(SHAPE)
            .fetch_one(&mut *conn)
            .await
            .map_err(ProvisionError::setup)?;
        let sequences = sqlx::query_as(
            "SELECT sequencename::text, coalesce(last_value, start_value), last_value IS NOT NULL \
               FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(ProvisionError::setup)?;
        Ok(Self { shape, sequences })
    }

    /// As a comment: the shape on the first line, then one line per sequence.
    pub(crate) fn to_comment(&self) -> String {
        let mut s = self.shape.clone();
        for (name, value, called) in &self.sequences {
            s.push_str(&format!("\n{name} {value} {called}"));
        }
        s
    }

    fn parse(comment: &str) -> Option<Self> {
        let mut lines = comment.lines();
        let shape = lines.next()?.to_owned();
        let sequences = lines
            .map(|l| {
                let mut parts = l.split(' ');
                let name = parts.next()?.to_owned();
                let value = parts.next()?.parse().ok()?;
                let called = parts.next()?.parse().ok()?;
                Some((name, value, called))
            })
            .collect::<Option<_>>()?;
        Some(Self { shape, sequences })
    }
}

/// A slot held by this environment; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct CaseDatabase {
    /// The slot's database name.
    pub(crate) name: String,
    _holder: PgConnection,
}

impl CaseDatabase {
    /// Takes the first free slot of `template` on the server of `admin_url`, creating it
    /// if it does not exist yet, and empties it.
    pub(crate) async fn claim(admin_url: &str, template: &str) -> Result<Self, ProvisionError> {
        let mut holder = PgConnection::connect(admin_url)
            .await
            .map_err(ProvisionError::setup)?;
        for slot in 0..MAX_SLOTS {
            let name = format!("{template}_s{slot}");
            let free: bool =
                sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
                    .bind(&name)
                    .fetch_one(&mut holder)
                    .await
                    .map_err(ProvisionError::setup)?;
            if !free {
                continue;
            }
            prepare(&mut holder, admin_url, template, &name).await?;
            return Ok(Self {
                name,
                _holder: holder,
            });
        }
        Err(ProvisionError::Setup(format!(
            "all {MAX_SLOTS} database slots of {template} are held"
        )))
    }
}

/// Makes the held slot `name` an empty copy of `template`.
async fn prepare(
    admin: &mut PgConnection,
    admin_url: &str,
    template: &str,
    name: &str,
) -> Result<(), ProvisionError> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut *admin)
            .await
            .map_err(ProvisionError::setup)?;
    if exists {
        // Connections a previous holder left behind (an engine's pool, a killed server's
        // backends) must not write into the next holder's case.
        sqlx::query(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(name)
        .execute(&mut *admin)
        .await
        .map_err(ProvisionError::setup)?;
        if empty_if_reusable(admin_url, template, name).await? {
            return Ok(());
        }
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .await
            .map_err(ProvisionError::setup)?;
    }
    create_from_template(admin, name, template).await
}

/// Empties the slot if it still has the template's shape and size; false if it must be
/// copied again.
async fn empty_if_reusable(
    admin_url: &str,
    template: &str,
    name: &str,
) -> Result<bool, ProvisionError> {
    let mut conn = PgConnection::connect(&with_database(admin_url, name))
        .await
        .map_err(ProvisionError::setup)?;
    let (shape, size, template_size): (String, i64, i64) =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT ({SHAPE}), pg_database_size(current_database()), \
                (SELECT pg_database_size(datname) FROM pg_database WHERE datname = $1)"
        )))
        .bind(template)
        .fetch_one(&mut conn)
        .await
        .map_err(ProvisionError::setup)?;
    let comment: Option<String> = sqlx::query_scalar(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
    )
    .bind(template)
    .fetch_one(&mut conn)
    .await
    .map_err(ProvisionError::setup)?;
    let record = comment.as_deref().and_then(TemplateRecord::parse);
    let reusable = record
        .as_ref()
        .filter(|r| r.shape == shape && size <= template_size + REUSE_GROWTH);
    let Some(record) = reusable else {
        let _ = conn.close().await;
        return Ok(false);
    };
    empty(&mut conn, record).await?;
    let _ = conn.close().await;
    Ok(true)
}

/// Deletes every row but the migration log's (referencing tables first) and puts every
/// sequence back where the template has it, in one transaction.
async fn empty(conn: &mut PgConnection, record: &TemplateRecord) -> Result<(), ProvisionError> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c \
          WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') \
            AND c.relname <> '_sqlx_migrations'",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(ProvisionError::setup)?;
    let references: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c \
          WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(ProvisionError::setup)?;
    let mut tx = conn.begin().await.map_err(ProvisionError::setup)?;
    for table in deletion_order(tables, &references) {
        tx.execute(sqlx::AssertSqlSafe(format!("DELETE FROM \"{table}\"")))
            .await
            .map_err(ProvisionError::setup)?;
    }
    for (name, value, called) in &record.sequences {
        sqlx::query("SELECT setval(format('%I', $1::text)::regclass, $2, $3)")
            .bind(name)
            .bind(value)
            .bind(called)
            .execute(&mut *tx)
            .await
            .map_err(ProvisionError::setup)?;
    }
    tx.commit().await.map_err(ProvisionError::setup)?;
    Ok(())
}

/// `tables` ordered so that a table comes before every table it references (a foreign key
/// from `references[i].0` to `references[i].1`); a cycle keeps the remaining order.
fn deletion_order(mut tables: Vec<String>, references: &[(String, String)]) -> Vec<String> {
    let mut order = Vec::with_capacity(tables.len());
    while !tables.is_empty() {
        let referenced = |t: &String| {
            references
                .iter()
                .any(|(from, to)| to == t && from != t && tables.contains(from))
        };
        let (next, rest): (Vec<_>, Vec<_>) = tables.iter().cloned().partition(|t| !referenced(t));
        if next.is_empty() {
            order.extend(rest);
            break;
        }
        order.extend(next);
        tables = rest;
    }
    order
}

/// Copies `template` into a new database `database`.
async fn create_from_template(
    admin: &mut PgConnection,
    database: &str,
    template: &str,
) -> Result<(), ProvisionError> {
    let sql = format!("CREATE DATABASE \"{database}\" TEMPLATE \"{template}\"");
    let mut last = None;
    // Concurrent copies of one template can collide ("source database is being accessed").
    for attempt in 0..20u64 {
        match admin.execute(sqlx::AssertSqlSafe(sql.clone())).await {
            Ok(_) => return Ok(()),
            Err(e) => {
                last = Some(e.to_string());
                tokio::time::sleep(std::time::Duration::from_millis(50 * (attempt + 1))).await;
            }
        }
    }
    Err(ProvisionError::Setup(format!(
        "CREATE DATABASE {database}: {}",
        last.unwrap_or_default()
    )))
}

/// `url` with its database name replaced by `database` (its query kept).
pub(crate) fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let root = base.rsplit_once('/').map_or(base, |(r, _)| r);
    match query {
        Some(q) => format!("{root}/{database}?{q}"),
        None => format!("{root}/{database}"),
    }
}
