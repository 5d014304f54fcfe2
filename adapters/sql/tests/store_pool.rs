//! The connection pool trusts a connection it took back moments ago, and
//! checks one that sat idle: a connection the server closed while it was
//! idle (a restart, `wait_timeout`, a proxy) is replaced, not handed out.

use kairos_core::store::Health;
use kairos_store_sql::SqlStore;
use kairos_testkit as testkit;
use sqlx::Connection;
use std::time::Duration;

/// Longer than the store's idle trust window (one second).
const IDLE: Duration = Duration::from_millis(1_500);

/// Uses the store's pooled connections, lets the server close every one of
/// them, and checks that the store still answers once they have been idle.
async fn survives_closed_idle_connections(store: SqlStore, kill_all: impl AsyncFnOnce()) {
    for _ in 0..4 {
        store.ping().await.expect("store answers");
    }
    kill_all().await;
    tokio::time::sleep(IDLE).await;
    for _ in 0..4 {
        store
            .ping()
            .await
            .expect("idle connections the server closed are replaced");
    }
}

#[tokio::test]
async fn mysql_replaces_idle_connections_the_server_closed() {
    let Some(url) = testkit::mysql_fresh_database().await else {
        return;
    };
    let store = SqlStore::connect(&url).await.expect("connect MySQL");
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    survives_closed_idle_connections(store, async || {
        let mut admin = sqlx::MySqlConnection::connect(&url).await.expect("admin");
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()",
        )
        .bind(&db)
        .fetch_all(&mut admin)
        .await
        .expect("list connections");
        assert!(!ids.is_empty(), "the store holds connections to close");
        for id in ids {
            sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                .execute(&mut admin)
                .await
                .expect("kill");
        }
    })
    .await;
}

#[tokio::test]
async fn postgres_replaces_idle_connections_the_server_closed() {
    let Some(db) = testkit::postgres_fresh_database().await else {
        return;
    };
    let store = SqlStore::connect(db.url())
        .await
        .expect("connect PostgreSQL");
    survives_closed_idle_connections(store, async || {
        let mut admin = sqlx::PgConnection::connect(db.url()).await.expect("admin");
        let closed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut admin)
        .await
        .expect("terminate connections");
        assert!(!closed.is_empty(), "the store holds connections to close");
    })
    .await;
}
