//! [`History`]: executions as the API and the dashboard read them — one, a
//! job's or a tenant's newest first (keyset pages), their recorded
//! transitions, and a tenant's figures (`overview`). Every query names the
//! tenant in its `WHERE` clause.

mod overview;

use crate::db::Pool;
use crate::rows::{self, EXEC_COLS, page_size};
use crate::sql::{Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::overview::{ExecFilter, Overview};
use kairos_core::store::{History, Page, StoreResult};
use kairos_core::time::Millis;

/// `SELECT <every execution column> FROM executions e`.
fn exec_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("e", &EXEC_COLS).push(" FROM executions e");
    s
}

/// A page of executions, newest trigger first: `sql` selects from
/// `executions e` with its own conditions (and their values bound); the
/// keyset condition after `after`, the order and the limit are added here,
/// one row more than `limit` telling whether a next page exists.
async fn executions_page(
    pool: &Pool,
    mut sql: Sql,
    after: Option<(Millis, String)>,
    limit: u32,
) -> StoreResult<Page<Execution>> {
    if let Some((at, id)) = after {
        sql.push(" AND (e.scheduled_at < ")
            .bind(time(at))
            .push(" OR (e.scheduled_at = ")
            .bind(time(at))
            .push(" AND e.id < ")
            .bind(id)
            .push("))");
    }
    sql.push(" ORDER BY e.scheduled_at DESC, e.id DESC LIMIT ")
        .bind(i64::from(limit) + 1);
    let found = sql.fetch_all(pool).await?;
    let items = found
        .iter()
        .map(rows::execution)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(rows::page(items, limit, |e| {
        (e.scheduled_at, e.id.as_str())
    }))
}

#[async_trait]
impl History for SqlStore {
    async fn execution_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Execution>> {
        let row = exec_select()
            .push(" WHERE e.tenant = ")
            .bind(tenant)
            .push(" AND e.id = ")
            .bind(id)
            .fetch_optional(self.read())
            .await?;
        row.as_ref().map(rows::execution).transpose()
    }

    async fn executions_list_for_job(
        &self,
        tenant: &str,
        job_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Execution>> {
        let limit = page_size(limit);
        let after = match rows::page_start(cursor) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut sql = exec_select();
        sql.push(" WHERE e.job_id = ")
            .bind(job_id)
            .push(" AND e.tenant = ")
            .bind(tenant);
        executions_page(self.read(), sql, after, limit).await
    }

    async fn executions_list(
        &self,
        tenant: &str,
        filter: &ExecFilter,
    ) -> StoreResult<Page<Execution>> {
        let limit = page_size(filter.limit);
        let after = match rows::page_start(filter.cursor.as_deref()) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut sql = exec_select();
        sql.push(" WHERE e.tenant = ").bind(tenant);
        if !filter.statuses.is_empty() {
            sql.push(" AND e.status IN ")
                .list(filter.statuses.iter().map(|s| s.as_str()));
        }
        executions_page(self.read(), sql, after, limit).await
    }

    async fn tenant_overview(&self, tenant: &str, since: Millis) -> StoreResult<Overview> {
        overview::overview(self.read(), tenant, since).await
    }

    async fn execution_events(&self, tenant: &str, id: &str) -> StoreResult<Vec<ExecEvent>> {
        let found = Sql::new(
            "SELECT ev.execution_id AS execution_id, ev.attempt AS attempt, \
             ev.status AS status, ev.worker_id AS worker_id, ev.error AS error, \
             ev.occurred_at AS occurred_at FROM execution_events ev \
             JOIN executions e ON e.id = ev.execution_id WHERE e.tenant = ",
        )
        .bind(tenant)
        .push(" AND e.id = ")
        .bind(id)
        .push(" ORDER BY ev.id")
        .fetch_all(self.read())
        .await?;
        found.iter().map(rows::event).collect()
    }
}
