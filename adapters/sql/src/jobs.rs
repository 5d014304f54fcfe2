//! [`JobStore`]: create (idempotent per tenant and `client_request_id`), read,
//! list with keyset paging, and the caller's control operations.

use super::SqlStore;
use super::db::{On, Tx};
use super::error::retrying;
use super::inserts::{self, EventRow};
use super::rows::{self, JOB_COLS, R};
use super::sql::{CHUNK, Fields, Sql, time};
use async_trait::async_trait;
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::job::{Job, JobTransition, NewJob};
use kairos_core::store::{
    ControlOutcome, CreateOutcome, JobFilter, JobStore, JobUpdate, Page, StoreResult, UpdateOutcome,
};
use kairos_core::time::Millis;

/// Page size when the caller asks for none.
pub(crate) const DEFAULT_PAGE: u32 = 50;
/// Largest page served.
pub(crate) const MAX_PAGE: u32 = 1_000;

pub(crate) fn page_size(limit: u32) -> u32 {
    if limit == 0 {
        DEFAULT_PAGE
    } else {
        limit.min(MAX_PAGE)
    }
}

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

/// `SELECT <every job column> FROM jobs j`, for a `WHERE` to follow.
fn job_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("j", &JOB_COLS).push(" FROM jobs j");
    s
}

/// One job of a tenant, read on `on` (row-locked where the database has row
/// locks, when `lock`).
pub(crate) async fn get_job(
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

impl SqlStore {
    /// Applies a caller's move to a job in one transaction; `Done` with the job
    /// as it is afterwards, or why not. `cancel` also cancels pending executions.
    async fn control(
        &self,
        tenant: &str,
        id: &str,
        t: JobTransition,
        reason: Option<&str>,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        // Cancel locks the job, then its executions; a result batch locks
        // them the other way round, so InnoDB may pick this as a victim.
        retrying(|| self.try_control(tenant, id, t, reason, now)).await
    }

    async fn try_control(
        &self,
        tenant: &str,
        id: &str,
        t: JobTransition,
        reason: Option<&str>,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        let mut tx = self.begin().await?;
        let from = t.from_states();
        let mut set = Fields::new()
            .with("status", t.to_state().as_str())
            .with("updated_at", time(now));
        // A pause records its reason (or none); a resume clears it.
        if t == JobTransition::Pause {
            set.set("pause_reason", reason);
        }
        let mut s = Sql::new("UPDATE jobs SET ");
        s.set(&set).push(", version = version + 1");
        match t {
            JobTransition::Cancel => {
                s.push(", next_trigger_at = NULL");
            }
            JobTransition::Resume => {
                s.push(", pause_reason = NULL");
            }
            _ => {}
        }
        s.push(" WHERE tenant = ")
            .bind(tenant)
            .push(" AND id = ")
            .bind(id)
            .push(" AND status IN ")
            .list(from.iter().map(|st| st.as_str()));
        let moved = s.execute(&mut tx).await? == 1;
        let Some(job) = get_job(&mut tx, tenant, id, false).await? else {
            return Ok(ControlOutcome::NotFound);
        };
        if !moved {
            return Ok(ControlOutcome::Conflict(job));
        }
        if t == JobTransition::Cancel {
            self.cancel_pending(&mut tx, &job, now).await?;
            super::stop::request_for_job(&mut tx, &job.id, now).await?;
        }
        tx.commit().await?;
        Ok(ControlOutcome::Done(job))
    }

    /// Cancels the job's pending executions, with their events and callbacks.
    async fn cancel_pending(&self, tx: &mut Tx, job: &Job, now: Millis) -> StoreResult<()> {
        let t = ExecTransition::Cancel;
        let from = t.from_states();
        let found = Sql::new("SELECT ")
            .columns("e", &rows::EXEC_COLS)
            .push(" FROM executions e WHERE e.job_id = ")
            .bind(job.id.as_str())
            .push(" AND e.status IN ")
            .list(from.iter().map(|st| st.as_str()))
            .for_update()
            .fetch_all(&mut *tx)
            .await?;
        let mut execs = found
            .iter()
            .map(rows::execution)
            .collect::<StoreResult<Vec<_>>>()?;
        let set = Fields::new()
            .with("status", t.to_state().as_str())
            .with("finished_at", time(now))
            .with("updated_at", time(now));
        for chunk in execs.chunks(CHUNK) {
            Sql::new("UPDATE executions SET ")
                .set(&set)
                .push(" WHERE id IN ")
                .list(chunk.iter().map(|e| e.id.as_str()))
                .push(" AND status IN ")
                .list(from.iter().map(|st| st.as_str()))
                .execute(&mut *tx)
                .await?;
        }
        let mut events = Vec::with_capacity(execs.len());
        let mut callbacks = Vec::new();
        for e in &mut execs {
            e.status = t.to_state();
            e.finished_at = Some(now);
            events.push(EventRow::plain(&e.id, e.attempt, e.status, now));
            if let Some(url) = &job.callback_url {
                callbacks.push(inserts::new_callback(e, url, now));
            }
        }
        inserts::events(tx, &events).await?;
        inserts::callbacks(tx, &callbacks).await
    }

    /// The first free trigger time at or after `now` for a manual trigger
    /// (`(job_id, scheduled_at)` is unique).
    async fn free_slot(&self, tx: &mut Tx, job_id: &str, now: Millis) -> StoreResult<Millis> {
        let found = Sql::new("SELECT scheduled_at FROM executions WHERE job_id = ")
            .bind(job_id)
            .push(" AND scheduled_at >= ")
            .bind(time(now))
            .push(" ORDER BY scheduled_at LIMIT 1000")
            .fetch_all(tx)
            .await?;
        let taken = found
            .iter()
            .map(|row| R::new(row, "executions").time("scheduled_at"))
            .collect::<StoreResult<Vec<Millis>>>()?;
        let mut slot = now;
        for t in taken {
            if t != slot {
                break;
            }
            slot += 1;
        }
        Ok(slot)
    }
}

#[async_trait]
impl JobStore for SqlStore {
    async fn job_create(&self, job: NewJob) -> StoreResult<CreateOutcome> {
        self.inner.creates.submit(job).await
    }

    async fn jobs_create_many(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<CreateOutcome>> {
        retrying(|| super::create::create_together(self, jobs.clone())).await
    }

    async fn job_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Job>> {
        get_job(self.read(), tenant, id, false).await
    }

    async fn job_list(&self, tenant: &str, filter: &JobFilter) -> StoreResult<Page<Job>> {
        let limit = page_size(filter.limit);
        let after = match rows::page_start(filter.cursor.as_deref()) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut s = job_select();
        s.push(" WHERE j.tenant = ").bind(tenant);
        if let Some(status) = filter.status {
            s.push(" AND j.status = ").bind(status.as_str());
        }
        if let Some(h) = &filter.handler {
            s.push(" AND j.handler = ").bind(h);
        }
        // `!` escapes: the one LIKE escape every database reads the same way.
        // LOWER on both sides: MySQL's binary collation would otherwise make
        // the search case-sensitive there and not on SQLite.
        if let Some(p) = filter.name_contains.as_deref().map(like_pattern) {
            s.push(" AND LOWER(j.name) LIKE ")
                .bind(p)
                .push(" ESCAPE '!'");
        }
        if let Some((at, id)) = &after {
            s.push(" AND (j.created_at < ")
                .bind(time(*at))
                .push(" OR (j.created_at = ")
                .bind(time(*at))
                .push(" AND j.id < ")
                .bind(id)
                .push("))");
        }
        let found = s
            .push(" ORDER BY j.created_at DESC, j.id DESC LIMIT ")
            .bind(i64::from(limit) + 1)
            .fetch_all(self.read())
            .await?;
        let items = found
            .iter()
            .map(rows::job)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(rows::page(items, limit, |j| (j.created_at, j.id.as_str())))
    }

    async fn job_pause(
        &self,
        tenant: &str,
        id: &str,
        reason: Option<&str>,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        self.control(tenant, id, JobTransition::Pause, reason, now)
            .await
    }

    async fn job_resume(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome> {
        self.control(tenant, id, JobTransition::Resume, None, now)
            .await
    }

    async fn job_cancel(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<ControlOutcome> {
        self.control(tenant, id, JobTransition::Cancel, None, now)
            .await
    }

    async fn job_trigger_now(
        &self,
        tenant: &str,
        id: &str,
        execution_id: &str,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        retrying(|| self.try_trigger_now(tenant, id, execution_id, now)).await
    }

    async fn job_update(
        &self,
        tenant: &str,
        id: &str,
        expected_version: i64,
        update: &JobUpdate,
        now: Millis,
    ) -> StoreResult<UpdateOutcome> {
        retrying(|| self.try_update(tenant, id, expected_version, update, now)).await
    }
}

impl SqlStore {
    async fn try_trigger_now(
        &self,
        tenant: &str,
        id: &str,
        execution_id: &str,
        now: Millis,
    ) -> StoreResult<ControlOutcome> {
        let mut tx = self.begin().await?;
        let Some(job) = get_job(&mut tx, tenant, id, true).await? else {
            return Ok(ControlOutcome::NotFound);
        };
        // A manual trigger fires where a scheduled one could: the states a
        // claim may start from (not paused, not terminal). The job's own
        // state is left alone, so its schedule carries on.
        if !JobTransition::Claim.allowed_from(job.status) {
            return Ok(ControlOutcome::Conflict(job));
        }
        let at = self.free_slot(&mut tx, &job.id, now).await?;
        let pending = ExecStatus::Pending;
        let exec = Fields::new()
            .with("id", execution_id)
            .with("job_id", job.id.as_str())
            .with("tenant", job.tenant.as_str())
            .with("scheduled_at", time(at))
            .with("attempt", 1_i64)
            .with("status", pending.as_str())
            .with("not_before", time(at))
            .with("created_at", time(now))
            .with("updated_at", time(now));
        Sql::new("INSERT INTO executions")
            .rows([&exec])
            .execute(&mut tx)
            .await?;
        inserts::events(&mut tx, &[EventRow::plain(execution_id, 1, pending, now)]).await?;
        tx.commit().await?;
        Ok(ControlOutcome::Done(job))
    }
}
