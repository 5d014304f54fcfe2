//! [`SessionStore`]: the dashboard's sessions, by the hash of their id.

use crate::db::Row;
use crate::rows::R;
use crate::sql::{Fields, Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::store::{SessionStore, StoreResult};
use kairos_core::tenant::UiSession;
use kairos_core::time::Millis;

const SESSION_COLS: [&str; 4] = ["id_hash", "key_prefix", "created_at", "expires_at"];

fn session(row: &Row) -> StoreResult<UiSession> {
    let r = R::new(row, "ui_sessions");
    Ok(UiSession {
        id_hash: r.string("id_hash")?,
        key_prefix: r.string("key_prefix")?,
        created_at: r.time("created_at")?,
        expires_at: r.time("expires_at")?,
    })
}

#[async_trait]
impl SessionStore for SqlStore {
    async fn ui_session_create(&self, s: &UiSession) -> StoreResult<()> {
        let f = Fields::new()
            .with("id_hash", s.id_hash.as_str())
            .with("key_prefix", s.key_prefix.as_str())
            .with("created_at", time(s.created_at))
            .with("expires_at", time(s.expires_at));
        Sql::new("INSERT INTO ui_sessions")
            .rows([&f])
            .execute(self.write())
            .await?;
        Ok(())
    }

    async fn ui_session_get(&self, id_hash: &str) -> StoreResult<Option<UiSession>> {
        let row = Sql::new("SELECT ")
            .names(&SESSION_COLS)
            .push(" FROM ui_sessions WHERE id_hash = ")
            .bind(id_hash)
            .fetch_optional(self.read())
            .await?;
        row.as_ref().map(session).transpose()
    }

    async fn ui_session_delete(&self, id_hash: &str) -> StoreResult<()> {
        Sql::new("DELETE FROM ui_sessions WHERE id_hash = ")
            .bind(id_hash)
            .execute(self.write())
            .await?;
        Ok(())
    }

    async fn ui_sessions_purge(&self, now: Millis) -> StoreResult<u64> {
        Sql::new("DELETE FROM ui_sessions WHERE expires_at <= ")
            .bind(time(now))
            .execute(self.write())
            .await
    }
}
