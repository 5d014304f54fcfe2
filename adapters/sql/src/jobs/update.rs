//! `PATCH` of a job: one transaction that locks the job, checks the
//! revision the caller read, recomputes the next trigger when the schedule
//! changed, and writes the new definition.
//!
//! The check is against the caller's revision, not the scheduler's
//! version: a claim or a result in between changes neither the definition
//! nor anything a person set, so it does not make the edit conflict. The
//! write still bumps the version too, under the row lock: a claim computed
//! from the job as scanned before the edit then loses, and the next scan
//! claims the new definition (no trigger of the old schedule fires after
//! the edit, none fires twice).

use super::get_job;
use crate::create::sensitive_json;
use crate::db::Tx;
use crate::sched_cols::schedule_columns;
use crate::sql::{Fields, Sql, from_u64, json, time};
use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobStatus, JobTransition};
use kairos_core::store::{JobUpdate, StoreResult, UpdateOutcome};
use kairos_core::time::Millis;
use kairos_core::trigger;

/// `job_update`'s transaction.
pub(super) async fn update(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    expected_revision: i64,
    u: &JobUpdate,
    now: Millis,
) -> StoreResult<UpdateOutcome> {
    let Some(job) = get_job(&mut tx, tenant, id, true).await? else {
        return tx.unchanged(UpdateOutcome::NotFound).await;
    };
    if job.revision != expected_revision {
        return tx.unchanged(UpdateOutcome::VersionConflict(job)).await;
    }
    // A one-shot whose trigger was claimed has nothing left to move.
    let fired_once = !job.schedule.is_recurring() && job.next_trigger_at.is_none();
    if job.status.is_terminal() || (u.reschedule && fired_once) {
        return tx.unchanged(UpdateOutcome::Conflict(job)).await;
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
    write_update(&mut tx, &job, u, next, status, now).await?;
    let Some(job) = get_job(&mut tx, tenant, id, false).await? else {
        return tx.unchanged(UpdateOutcome::NotFound).await;
    };
    tx.commit().await?;
    Ok(UpdateOutcome::Done(job))
}

async fn write_update(
    tx: &mut Tx,
    job: &Job,
    u: &JobUpdate,
    next: Option<Millis>,
    status: JobStatus,
    now: Millis,
) -> StoreResult<()> {
    let mut set = Fields::new()
        .with("params", json(u.params.to_string()))
        .with("sensitive_params", sensitive_json(&u.sensitive_params));
    schedule_columns(&u.schedule).fields(&mut set);
    set.set("next_trigger_at", time(next))
        .set("status", status.as_str())
        .set("callback_url", u.callback_url.as_ref())
        .set("max_attempts", u.retry.max_attempts)
        .set("retry_backoff_ms", from_u64(u.retry.backoff_ms))
        .set("timeout_ms", u.timeout_ms.map(from_u64))
        .set("worker_group", u.worker_group.as_ref())
        .set("priority", i64::from(u.priority.get()))
        .set("max_concurrency", u.max_concurrency.map(i64::from))
        .set("updated_at", time(now));
    Sql::new("UPDATE jobs SET ")
        .set(&set)
        .push(", version = version + 1, revision = revision + 1 WHERE id = ")
        .bind(job.id.as_str())
        .push(" AND version = ")
        .bind(job.version)
        .execute(tx)
        .await?;
    Ok(())
}

/// Whether the job has an execution that has not ended.
async fn has_live(tx: &mut Tx, job_id: &str) -> StoreResult<bool> {
    let found = Sql::new("SELECT id FROM executions WHERE job_id = ")
        .bind(job_id)
        .push(" AND status IN ")
        .list(ExecStatus::LIVE.iter().map(|st| st.as_str()))
        .push(" LIMIT 1")
        .fetch_optional(tx)
        .await?;
    Ok(found.is_some())
}
