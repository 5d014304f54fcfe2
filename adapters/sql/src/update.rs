//! `PATCH` of a job: one transaction that locks the job, checks the version
//! the caller read, recomputes the next trigger when the schedule changed,
//! and writes the new definition.

use super::error::db_err;
use super::jobs::get_job;
use super::sched_cols::schedule_columns;
use super::stmt::{bind_names, from_u64, marks, q};
use super::{Dialect, SqlStore};
use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobStatus, JobTransition};
use kairos_core::store::{JobUpdate, StoreResult, UpdateOutcome};
use kairos_core::time::Millis;
use kairos_core::trigger;
use sqlx::AnyConnection;

impl SqlStore {
    pub(crate) async fn try_update(
        &self,
        tenant: &str,
        id: &str,
        expected_version: i64,
        u: &JobUpdate,
        now: Millis,
    ) -> StoreResult<UpdateOutcome> {
        let mut tx = self.begin().await?;
        let Some(job) = get_job(self, &mut tx, tenant, id, true).await? else {
            return Ok(UpdateOutcome::NotFound);
        };
        if job.version != expected_version {
            return Ok(UpdateOutcome::VersionConflict(job));
        }
        // A one-shot whose trigger was claimed has nothing left to move.
        let fired_once = !job.schedule.is_recurring() && job.next_trigger_at.is_none();
        if job.status.is_terminal() || (u.reschedule && fired_once) {
            return Ok(UpdateOutcome::Conflict(job));
        }
        let (next, status) = if u.reschedule {
            let live = has_live(&mut tx, &job.id).await?;
            let next = trigger::rescheduled(&u.schedule, now, job.created_at, live);
            let done = next.is_none() && !live && u.schedule.is_recurring();
            let status = if done {
                JobTransition::Complete.to_state()
            } else {
                job.status
            };
            (next, status)
        } else {
            (job.next_trigger_at, job.status)
        };
        self.write_update(&mut tx, &job, u, next, status, now)
            .await?;
        let Some(job) = get_job(self, &mut tx, tenant, id, false).await? else {
            return Ok(UpdateOutcome::NotFound);
        };
        tx.commit().await.map_err(db_err)?;
        Ok(UpdateOutcome::Done(job))
    }

    async fn write_update(
        &self,
        conn: &mut AnyConnection,
        job: &Job,
        u: &JobUpdate,
        next: Option<Millis>,
        status: JobStatus,
        now: Millis,
    ) -> StoreResult<()> {
        let c = schedule_columns(&u.schedule);
        q(
            self.dialect(),
            "UPDATE jobs SET params = ?, schedule_kind = ?, cron_expr = ?, timezone = ?, \
             once_at = ?, every_ms = ?, delay_ms = ?, start_at = ?, end_at = ?, \
             misfire_policy = ?, overlap_policy = ?, next_trigger_at = ?, status = ?, \
             callback_url = ?, max_attempts = ?, retry_backoff_ms = ?, timeout_ms = ?, \
             worker_group = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?",
        )
        .bind(u.params.to_string())
        .bind(c.kind)
        .bind(c.cron_expr.map(str::to_string))
        .bind(c.timezone.map(str::to_string))
        .bind(c.once_at)
        .bind(c.every_ms)
        .bind(c.delay_ms)
        .bind(c.start_at)
        .bind(c.end_at)
        .bind(c.misfire)
        .bind(c.overlap)
        .bind(next)
        .bind(status.as_str())
        .bind(u.callback_url.clone())
        .bind(i64::from(u.retry.max_attempts))
        .bind(from_u64(u.retry.backoff_ms))
        .bind(u.timeout_ms.map(from_u64))
        .bind(u.worker_group.clone())
        .bind(now)
        .bind(job.id.as_str())
        .bind(job.version)
        .execute(conn)
        .await
        .map_err(db_err)?;
        Ok(())
    }
}

/// Whether the job has an execution that has not ended.
async fn has_live(conn: &mut AnyConnection, job_id: &str) -> StoreResult<bool> {
    let live = ExecStatus::LIVE;
    let sql = format!(
        "SELECT id FROM executions WHERE job_id = ? AND status IN ({}) LIMIT 1",
        marks(live.len())
    );
    let found = bind_names(
        q(Dialect::of(conn), sql).bind(job_id),
        live.iter().map(|s| s.as_str()),
    )
    .fetch_optional(conn)
    .await
    .map_err(db_err)?;
    Ok(found.is_some())
}
