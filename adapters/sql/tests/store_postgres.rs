//! Store suite, PostgreSQL only: claims and callback leases pass over rows
//! another transaction holds (`FOR UPDATE SKIP LOCKED`) instead of waiting,
//! and the PostgreSQL schema is the MySQL one (same tables, columns,
//! nullability, keys, indexes and foreign keys).

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::store::{CallbackStore, Claim, Dispatch, JobStore};
use kairos_store_sql::SqlStore;
use sqlx::Connection;
use std::collections::BTreeSet;
use std::time::Duration;
use support::{T0, create, one_shot, terminal_with_callbacks};

/// Far longer than a claim takes, far shorter than a lock wait would last.
const NO_WAIT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_passes_over_a_job_another_transaction_holds() {
    let Some((store, db)) = support::postgres_store().await else {
        return;
    };
    let job = create(&store, one_shot("sk", T0)).await;
    let claim = Claim {
        shard: Default::default(),
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: T0,
        next_trigger_at: None,
        execution_id: support::id(),
        worker_id: None,
    };
    let mut other = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let mut holder = other.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(&job.id)
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    let won = tokio::time::timeout(
        NO_WAIT,
        store.triggers_claim(
            DispatchScope::All { fence: 1 },
            std::slice::from_ref(&claim),
            T0,
        ),
    )
    .await
    .expect("the claim does not wait for the held job")
    .unwrap()
    .work;
    assert!(won.is_empty(), "a held job is not claimed: {won:?}");
    holder.rollback().await.unwrap();

    let won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[claim], T0)
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 1, "released, the job is claimed");
    let stored = store.job_get("sk", &job.id).await.unwrap().expect("job");
    assert_eq!(stored.version, job.version + 1);
    other.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_passes_over_callbacks_another_transaction_holds() {
    let Some((store, db)) = support::postgres_store().await else {
        return;
    };
    terminal_with_callbacks(&store, "cb", 3).await;
    let mut other = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let mut holder = other.begin().await.unwrap();
    let held: String = sqlx::query_scalar(
        "SELECT id FROM callbacks ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE",
    )
    .fetch_one(&mut *holder)
    .await
    .unwrap();
    let got = tokio::time::timeout(
        NO_WAIT,
        store.callbacks_claim_due("relay-1", T0 + 5, 60_000, 10),
    )
    .await
    .expect("the lease does not wait for the held row")
    .unwrap();
    let ids: BTreeSet<String> = got.into_iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 2, "the two free rows are leased");
    assert!(!ids.contains(&held), "the held row is passed over");
    holder.rollback().await.unwrap();

    let rest = store
        .callbacks_claim_due("relay-2", T0 + 5, 60_000, 10)
        .await
        .unwrap();
    let rest: Vec<String> = rest.into_iter().map(|c| c.id).collect();
    assert_eq!(
        rest,
        [held],
        "released, the row is leased by the next claim"
    );
    other.close().await.unwrap();
}

/// `(table, column, nullable)` of every column but sqlx's own table.
type Columns = BTreeSet<(String, String, String)>;
/// `(table, index, position, column)` of every index column; primary keys
/// are named `PRIMARY`, as MySQL names them.
type IndexColumns = BTreeSet<(String, String, i64, String)>;
/// `(table, constraint, referenced table)` of every foreign key.
type ForeignKeys = BTreeSet<(String, String, String)>;

async fn mysql_schema(url: &str) -> (Columns, IndexColumns, ForeignKeys) {
    let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name, column_name, is_nullable FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let indexes: Vec<(String, String, i64, String)> = sqlx::query_as(
        "SELECT table_name, index_name, CAST(seq_in_index AS SIGNED), column_name \
         FROM information_schema.statistics \
         WHERE table_schema = DATABASE() AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let fks: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name, constraint_name, referenced_table_name \
         FROM information_schema.referential_constraints \
         WHERE constraint_schema = DATABASE()",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    (
        columns.into_iter().collect(),
        indexes.into_iter().collect(),
        fks.into_iter().collect(),
    )
}

async fn postgres_schema(url: &str) -> (Columns, IndexColumns, ForeignKeys) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, is_nullable::text \
         FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let indexes: Vec<(String, String, i64, String)> = sqlx::query_as(
        "SELECT t.relname::text, \
                CASE WHEN x.indisprimary THEN 'PRIMARY' ELSE i.relname::text END, \
                k.n, a.attname::text \
         FROM pg_index x \
         JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace ns ON ns.oid = t.relnamespace \
         CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) \
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum \
         WHERE ns.nspname = 'public' AND t.relname <> '_sqlx_migrations'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let fks: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.conname::text, c.confrelid::regclass::text \
         FROM pg_constraint c JOIN pg_namespace ns ON ns.oid = c.connamespace \
         WHERE c.contype = 'f' AND ns.nspname = 'public'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    (
        columns.into_iter().collect(),
        indexes.into_iter().collect(),
        fks.into_iter().collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_schema_is_the_mysql_schema() {
    let Some(mysql_url) = kairos_testkit::mysql_fresh_database().await else {
        return;
    };
    let Some(pg) = kairos_testkit::postgres_fresh_database().await else {
        return;
    };
    for url in [mysql_url.as_str(), pg.url()] {
        let store = SqlStore::connect(url).await.unwrap();
        store.migrate().await.unwrap();
        store.close().await;
    }
    let (m_cols, m_idx, m_fks) = mysql_schema(&mysql_url).await;
    let (p_cols, p_idx, p_fks) = postgres_schema(pg.url()).await;
    assert!(m_cols.len() > 50, "the MySQL schema was read: {m_cols:?}");
    let diff = |a: &Columns, b: &Columns| a.symmetric_difference(b).cloned().collect::<Vec<_>>();
    assert_eq!(diff(&m_cols, &p_cols), [], "columns and nullability differ");
    let idiff = m_idx.symmetric_difference(&p_idx).collect::<Vec<_>>();
    assert!(idiff.is_empty(), "keys and indexes differ: {idiff:?}");
    let fdiff = m_fks.symmetric_difference(&p_fks).collect::<Vec<_>>();
    assert!(fdiff.is_empty(), "foreign keys differ: {fdiff:?}");

    // Times and documents have the database's own types, in the same columns.
    let (m_times, m_json) = mysql_native(&mysql_url).await;
    let (p_times, p_json) = postgres_native(pg.url()).await;
    assert!(
        m_times.len() > 30,
        "every time column is DATETIME: {m_times:?}"
    );
    assert_eq!(
        m_times, p_times,
        "DATETIME(3) and TIMESTAMPTZ columns differ"
    );
    // 6, 4 of migration 0017 (workflows) and 2 of 0019 (their kept graphs).
    assert_eq!(m_json.len(), 12, "JSON columns: {m_json:?}");
    assert_eq!(m_json, p_json, "JSON and JSONB columns differ");
}

/// `(table, column)` pairs.
type Named = BTreeSet<(String, String)>;

/// MySQL's `DATETIME(3)` columns and `JSON` ones (MariaDB keeps JSON as
/// `LONGTEXT` with a `json_valid` check named after the column).
async fn mysql_native(url: &str) -> (Named, Named) {
    let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
    let times: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name, column_name FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND data_type = 'datetime' AND datetime_precision = 3",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let json: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name, constraint_name FROM information_schema.check_constraints \
         WHERE constraint_schema = DATABASE() AND check_clause LIKE 'json_valid(%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    (times.into_iter().collect(), json.into_iter().collect())
}

/// PostgreSQL's `TIMESTAMPTZ` and `JSONB` columns.
async fn postgres_native(url: &str) -> (Named, Named) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let of = |ty: &'static str| {
        sqlx::query_as::<_, (String, String)>(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = 'public' AND data_type = $1 \
               AND table_name <> '_sqlx_migrations'",
        )
        .bind(ty)
    };
    let times = of("timestamp with time zone")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let json = of("jsonb").fetch_all(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    (times.into_iter().collect(), json.into_iter().collect())
}
