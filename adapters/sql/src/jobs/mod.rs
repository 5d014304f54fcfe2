//! [`JobStore`]: create (idempotent per tenant and `client_request_id`, in
//! group commits: `crate::create`), read, list with keyset paging, the caller's
//! control operations (`control`) and changes (`update`).

mod control;
mod update;

use crate::db::On;
use crate::keyset;
use crate::rows::{self, JOB_COLS};
use crate::sql::Sql;
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::job::{FAILING_AFTER, Job, JobHealth, JobTransition, NewJob};
use kairos_core::store::{
    ControlOutcome, CreateOutcome, JobFilter, JobStore, JobUpdate, Page, StoreResult, UpdateOutcome,
};
use kairos_core::time::Millis;

/// `%text%` for `LIKE … ESCAPE '!'`, lower-cased, with the wildcards of
/// `text` escaped so they match themselves.
fn like_pattern(text: &str) -> String {
    let mut p = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '!') {
            p.push('!');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// ` WHERE …`: the tenant's jobs `filter` matches (cursor and limit aside).
fn filtered(s: &mut Sql, tenant: &str, filter: &JobFilter) {
    s.push(" WHERE j.tenant = ").bind(tenant);
    // A workflow node's internal job is shown through its workflow.
    s.push(" AND j.workflow_id IS NULL");
    if let Some(status) = filter.status {
        s.push(" AND j.status = ").bind(status.as_str());
    }
    if let Some(h) = &filter.handler {
        s.push(" AND j.handler = ").bind(h);
    }
    // What `JobHealth::of` says, in SQL.
    match filter.health {
        Some(JobHealth::Failing) => {
            s.push(" AND j.schedule_kind <> 'once' AND j.fail_streak >= ")
                .bind(i64::from(FAILING_AFTER));
        }
        Some(JobHealth::Ok) => {
            s.push(" AND (j.schedule_kind = 'once' OR j.fail_streak < ")
                .bind(i64::from(FAILING_AFTER))
                .push(")");
        }
        None => {}
    }
    // `!` escapes: the one LIKE escape every database reads the same way.
    // LOWER on both sides: MySQL's binary collation would otherwise make
    // the search case-sensitive there and not on SQLite.
    if let Some(p) = filter.name_contains.as_deref().map(like_pattern) {
        s.push(" AND LOWER(j.name) LIKE ")
            .bind(p)
            .push(" ESCAPE '!'");
    }
}

/// `SELECT <every job column> FROM jobs j`, for a `WHERE` to follow.
fn job_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("j", &JOB_COLS).push(" FROM jobs j");
    s
}

/// One job of a tenant, read on `on` (row-locked where the database has row
/// locks, when `lock`).
async fn get_job(
    on: impl Into<On<'_>>,
    tenant: &str,
    id: &str,
    lock: bool,
) -> StoreResult<Option<Job>> {
    let mut s = job_select();
    s.push(" WHERE j.tenant = ")
        .bind(tenant)
        .push(" AND j.id = ")
        .bind(id);
    if lock {
        s.for_update();
    }
    let row = s.fetch_optional(on).await?;
    row.as_ref().map(rows::job).transpose()
}

#[async_trait]
impl JobStore for SqlStore {
    async fn job_create(&self, job: NewJob) -> StoreResult<CreateOutcome> {
        self.creates().submit(job).await
    }

    async fn jobs_create_many(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<CreateOutcome>> {
        self.transaction(|tx| crate::create::create_together(tx, jobs.clone()))
            .await
    }

    async fn job_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Job>> {
        get_job(self.read(), tenant, id, false).await
    }

    async fn jobs_get_many(&self, tenant: &str, ids: &[&str]) -> StoreResult<Vec<Job>> {
        let found = crate::sql::fetch_chunked(self.read(), ids, |chunk| {
            // `+j.tenant` on SQLite: without statistics it would read the
            // tenant's jobs through a tenant index and test each id.
            let mut s = job_select();
            s.push(" WHERE j.id IN ")
                .list(chunk.iter().copied())
                .push(" AND ")
                .dialect("j.tenant", "j.tenant", "+j.tenant")
                .push(" = ")
                .bind(tenant);
            s
        })
        .await?;
        found.iter().map(rows::job).collect()
    }

    async fn job_list(&self, tenant: &str, filter: &JobFilter) -> StoreResult<Page<Job>> {
        let mut s = job_select();
        filtered(&mut s, tenant, filter);
        keyset::fetch(
            self.read(),
            &s,
            filter.cursor.as_deref(),
            filter.limit,
            ("j.created_at", "j.id"),
            rows::job,
            |j| (j.created_at, j.id.as_str()),
        )
        .await
    }

    async fn job_count(&self, tenant: &str, filter: &JobFilter, cap: u64) -> StoreResult<u64> {
        let mut s = Sql::new("SELECT COUNT(*) AS n FROM (SELECT j.id FROM jobs j");
        filtered(&mut s, tenant, filter);
        s.push(" LIMIT ")
            .bind(i64::try_from(cap).unwrap_or(i64::MAX))
            .push(") capped");
        let n: i64 = s.scalar(self.read(), "n").await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn job_pause(
        &self,
        tenant: &str,
        id: &str,
        reason: Option<&str>,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        self.transaction(|tx| {
            control::control(
                tx,
                tenant,
                id,
                JobTransition::Pause,
                reason,
                now,
                self.run_limits(),
            )
        })
        .await
    }

    async fn job_resume(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome> {
        self.transaction(|tx| {
            control::control(
                tx,
                tenant,
                id,
                JobTransition::Resume,
                None,
                now,
                self.run_limits(),
            )
        })
        .await
    }

    async fn job_cancel(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome> {
        self.transaction(|tx| {
            control::control(
                tx,
                tenant,
                id,
                JobTransition::Cancel,
                None,
                now,
                self.run_limits(),
            )
        })
        .await
    }

    async fn job_trigger_now(
        &self,
        tenant: &str,
        id: &str,
        execution_id: &str,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        self.transaction(|tx| control::trigger_now(tx, tenant, id, execution_id, now))
            .await
    }

    async fn job_update(
        &self,
        tenant: &str,
        id: &str,
        expected_revision: i64,
        update: &JobUpdate,
        now: Millis,
    ) -> StoreResult<UpdateOutcome> {
        self.transaction(|tx| update::update(tx, tenant, id, expected_revision, update, now))
            .await
    }
}
