//! [`History`]: executions as the API and the dashboard read them — one, a
//! job's or a tenant's newest first (keyset pages), their recorded
//! transitions, and a tenant's figures (`overview`). Every query names the
//! tenant in its `WHERE` clause.

mod overview;
mod timing;

use crate::db::Pool;
use crate::keyset;
use crate::rows::{self, EXEC_COLS};
use crate::sql::{Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::overview::{ExecFilter, Overview, Timing};
use kairos_core::store::{History, Page, StoreResult};
use kairos_core::time::Millis;

/// `SELECT <every execution column> FROM executions e`.
fn exec_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("e", &EXEC_COLS).push(" FROM executions e");
    s
}

/// The executions of a listing, newest trigger first: [`exec_select`] that
/// reads, on MySQL/MariaDB, the index in the listing's order. Given the
/// choice, MariaDB reads a job's executions through the trigger key
/// `(job_id, scheduled_at, shard_index)` and sorts them all (a filesort of
/// the job's history for one page), and a handler's through its jobs, whose
/// executions it sorts; PostgreSQL and SQLite pick these indexes by
/// themselves.
fn listing_select(by_job: bool) -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("e", &EXEC_COLS);
    listing_from(&mut s, by_job);
    s
}

/// ` FROM executions e` with the index hint of [`listing_select`].
fn listing_from(s: &mut Sql, by_job: bool) {
    s.push(" FROM executions e");
    if by_job {
        s.dialect(" FORCE INDEX (idx_executions_job_scheduled)", "", "");
    } else {
        s.dialect(" FORCE INDEX (idx_executions_tenant_scheduled)", "", "");
    }
}

/// A page of executions, newest trigger first: `sql` selects from
/// `executions e` with its own conditions (and their values bound).
async fn executions_page(
    pool: &Pool,
    sql: &Sql,
    cursor: Option<&str>,
    limit: u32,
) -> StoreResult<Page<Execution>> {
    keyset::fetch(
        pool,
        sql,
        cursor,
        limit,
        ("e.scheduled_at", "e.id"),
        rows::execution,
        |e| (e.scheduled_at, e.id.as_str()),
    )
    .await
}

/// ` WHERE …`: the tenant's executions `filter` matches (cursor and limit
/// aside).
fn filtered(sql: &mut Sql, tenant: &str, filter: &ExecFilter) {
    sql.push(" WHERE e.tenant = ").bind(tenant);
    if !filter.statuses.is_empty() {
        sql.push(" AND e.status IN ")
            .list(filter.statuses.iter().map(|s| s.as_str()));
    }
    if let Some(job) = &filter.job_id {
        sql.push(" AND e.job_id = ").bind(job.as_str());
    }
    if let Some(handler) = &filter.handler {
        // The handler is the job's: a subquery on the tenant's jobs keeps
        // the listing's order and keyset on the executions index.
        sql.push(" AND e.job_id IN (SELECT j.id FROM jobs j WHERE j.tenant = ")
            .bind(tenant)
            .push(" AND j.handler = ")
            .bind(handler.as_str())
            .push(")");
    }
    if let Some(worker) = &filter.worker_id {
        sql.push(" AND e.worker_id = ").bind(worker.as_str());
    }
    if let Some(from) = filter.from {
        sql.push(" AND e.scheduled_at >= ").bind(time(from));
    }
    if let Some(to) = filter.to {
        sql.push(" AND e.scheduled_at < ").bind(time(to));
    }
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
        let mut sql = listing_select(true);
        sql.push(" WHERE e.job_id = ")
            .bind(job_id)
            .push(" AND e.tenant = ")
            .bind(tenant);
        executions_page(self.read(), &sql, cursor, limit).await
    }

    async fn executions_list(
        &self,
        tenant: &str,
        filter: &ExecFilter,
    ) -> StoreResult<Page<Execution>> {
        let mut sql = listing_select(filter.job_id.is_some());
        filtered(&mut sql, tenant, filter);
        executions_page(self.read(), &sql, filter.cursor.as_deref(), filter.limit).await
    }

    async fn executions_count(
        &self,
        tenant: &str,
        filter: &ExecFilter,
        cap: u64,
    ) -> StoreResult<u64> {
        let mut sql = Sql::new("SELECT COUNT(*) AS n FROM (SELECT e.id");
        listing_from(&mut sql, filter.job_id.is_some());
        filtered(&mut sql, tenant, filter);
        sql.push(" LIMIT ")
            .bind(i64::try_from(cap).unwrap_or(i64::MAX))
            .push(") capped");
        let n: i64 = sql.scalar(self.read(), "n").await?;
        Ok(u64::try_from(n).unwrap_or(0))
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

    async fn trigger_timing(
        &self,
        tenant: &str,
        since: Millis,
        now: Millis,
    ) -> StoreResult<Timing> {
        timing::timing(self.read(), tenant, since, now).await
    }
}
