//! [`JobStore`]: create (idempotent per tenant and `client_request_id`), read,
//! list with keyset paging, and the caller's control operations.

use super::SqlStore;
use super::error::{db_err, retrying};
use super::inserts::{self, EventRow};
use super::rows::{self, JOB_COLS, select_list};
use super::stmt::{CHUNK, bind_names, marks, q, scalar};
use async_trait::async_trait;
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::job::{Job, JobTransition, NewJob};
use kairos_core::store::{
    ControlOutcome, CreateOutcome, JobFilter, JobStore, JobUpdate, Page, StoreResult, UpdateOutcome,
};
use kairos_core::time::Millis;
use sqlx::AnyConnection;

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

fn job_select() -> String {
    format!("SELECT {} FROM jobs j", select_list("j", &JOB_COLS))
}

/// One job of a tenant, read on `conn` (locked on MySQL when `lock`).
pub(crate) async fn get_job(
    store: &SqlStore,
    conn: &mut AnyConnection,
    tenant: &str,
    id: &str,
    lock: bool,
) -> StoreResult<Option<Job>> {
    let lock = if lock {
        store.dialect().for_update()
    } else {
        ""
    };
    let sql = format!("{} WHERE j.tenant = ? AND j.id = ?{lock}", job_select());
    let row = q(store.dialect(), sql)
        .bind(tenant)
        .bind(id)
        .fetch_optional(conn)
        .await
        .map_err(db_err)?;
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
        // A pause records its reason (or none); a resume clears it.
        let extra = match t {
            JobTransition::Cancel => ", next_trigger_at = NULL",
            JobTransition::Pause => ", pause_reason = ?",
            JobTransition::Resume => ", pause_reason = NULL",
            _ => "",
        };
        let sql = format!(
            "UPDATE jobs SET status = ?, version = version + 1, updated_at = ?{extra} \
             WHERE tenant = ? AND id = ? AND status IN ({})",
            marks(from.len())
        );
        let mut query = q(self.dialect(), sql).bind(t.to_state().as_str()).bind(now);
        if t == JobTransition::Pause {
            query = query.bind(reason.map(str::to_string));
        }
        let query = query.bind(tenant).bind(id);
        let moved = bind_names(query, from.iter().map(|s| s.as_str()))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?
            .rows_affected()
            == 1;
        let Some(job) = get_job(self, &mut tx, tenant, id, false).await? else {
            return Ok(ControlOutcome::NotFound);
        };
        if !moved {
            return Ok(ControlOutcome::Conflict(job));
        }
        if t == JobTransition::Cancel {
            self.cancel_pending(&mut tx, &job, now).await?;
            super::stop::request_for_job(&mut tx, &job.id, now).await?;
        }
        tx.commit().await.map_err(db_err)?;
        Ok(ControlOutcome::Done(job))
    }

    /// Cancels the job's pending executions, with their events and callbacks.
    async fn cancel_pending(
        &self,
        conn: &mut AnyConnection,
        job: &Job,
        now: Millis,
    ) -> StoreResult<()> {
        let t = ExecTransition::Cancel;
        let from = t.from_states();
        let sql = format!(
            "SELECT {} FROM executions e WHERE e.job_id = ? AND e.status IN ({}){}",
            select_list("e", &rows::EXEC_COLS),
            marks(from.len()),
            self.dialect().for_update()
        );
        let found = bind_names(
            q(self.dialect(), sql).bind(job.id.as_str()),
            from.iter().map(|s| s.as_str()),
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?;
        let mut execs = found
            .iter()
            .map(rows::execution)
            .collect::<StoreResult<Vec<_>>>()?;
        for chunk in execs.chunks(CHUNK) {
            let sql = format!(
                "UPDATE executions SET status = ?, finished_at = ?, updated_at = ? \
                 WHERE id IN ({}) AND status IN ({})",
                marks(chunk.len()),
                marks(from.len())
            );
            let mut query = q(self.dialect(), sql)
                .bind(t.to_state().as_str())
                .bind(now)
                .bind(now);
            for e in chunk {
                query = query.bind(e.id.as_str());
            }
            bind_names(query, from.iter().map(|s| s.as_str()))
                .execute(&mut *conn)
                .await
                .map_err(db_err)?;
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
        inserts::events(conn, &events).await?;
        inserts::callbacks(conn, &callbacks).await
    }

    /// The first free trigger time at or after `now` for a manual trigger
    /// (`(job_id, scheduled_at)` is unique).
    async fn free_slot(
        &self,
        conn: &mut AnyConnection,
        job_id: &str,
        now: Millis,
    ) -> StoreResult<Millis> {
        let taken: Vec<i64> = scalar(
            self.dialect(),
            "SELECT scheduled_at FROM executions WHERE job_id = ? AND scheduled_at >= ? \
             ORDER BY scheduled_at LIMIT 1000",
        )
        .bind(job_id)
        .bind(now)
        .fetch_all(conn)
        .await
        .map_err(db_err)?;
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
        let mut conn = self.read().acquire().await.map_err(db_err)?;
        get_job(self, &mut conn, tenant, id, false).await
    }

    async fn job_list(&self, tenant: &str, filter: &JobFilter) -> StoreResult<Page<Job>> {
        let limit = page_size(filter.limit);
        let after = match rows::page_start(filter.cursor.as_deref()) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut sql = format!("{} WHERE j.tenant = ?", job_select());
        if filter.status.is_some() {
            sql.push_str(" AND j.status = ?");
        }
        if filter.handler.is_some() {
            sql.push_str(" AND j.handler = ?");
        }
        // `!` escapes: the one LIKE escape both databases read the same way.
        // LOWER on both sides: MySQL's binary collation would otherwise make
        // the search case-sensitive there and not on SQLite.
        let pattern = filter.name_contains.as_deref().map(like_pattern);
        if pattern.is_some() {
            sql.push_str(" AND LOWER(j.name) LIKE ? ESCAPE '!'");
        }
        if after.is_some() {
            sql.push_str(" AND (j.created_at < ? OR (j.created_at = ? AND j.id < ?))");
        }
        sql.push_str(" ORDER BY j.created_at DESC, j.id DESC LIMIT ?");
        let mut query = q(self.dialect(), sql).bind(tenant);
        if let Some(s) = filter.status {
            query = query.bind(s.as_str());
        }
        if let Some(h) = &filter.handler {
            query = query.bind(h.clone());
        }
        if let Some(p) = pattern {
            query = query.bind(p);
        }
        if let Some((at, id)) = &after {
            query = query.bind(*at).bind(*at).bind(id.clone());
        }
        let found = query
            .bind(i64::from(limit) + 1)
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
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
        let Some(job) = get_job(self, &mut tx, tenant, id, true).await? else {
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
        q(
            self.dialect(),
            "INSERT INTO executions (id, job_id, tenant, scheduled_at, attempt, status, \
             not_before, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(execution_id)
        .bind(job.id.as_str())
        .bind(job.tenant.as_str())
        .bind(at)
        .bind(1_i64)
        .bind(pending.as_str())
        .bind(at)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        inserts::events(&mut tx, &[EventRow::plain(execution_id, 1, pending, now)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(ControlOutcome::Done(job))
    }
}
