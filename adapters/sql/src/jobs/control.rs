//! The caller's control of a job: pause, resume and cancel (cancel also ends
//! the job's pending executions and asks for its running ones to stop), and
//! the manual trigger, each one transaction.

use super::get_job;
use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::rows::{self, R};
use crate::sql::{CHUNK, Fields, Sql, time};
use crate::stop;
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::job::{Job, JobTransition};
use kairos_core::store::{ControlOutcome, StoreResult};
use kairos_core::time::Millis;

/// A caller's move of a job (pause, resume, cancel) in `tx`, committed when
/// it applies; `Done` with the job as it is afterwards, or why not. `cancel`
/// also cancels pending executions and asks for the running ones to stop.
/// Cancel locks the job, then its executions; a result batch locks them the
/// other way round, so InnoDB may pick this as a deadlock victim (and the
/// caller runs it again).
pub(super) async fn control(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    t: JobTransition,
    reason: Option<&str>,
    now: Millis,
) -> StoreResult<ControlOutcome> {
    let from = t.from_states();
    let mut set = Fields::new()
        .with("status", t.to_state().as_str())
        .with("updated_at", time(now));
    // A pause records its reason (or none); a resume clears it.
    if t == JobTransition::Pause {
        set.set("pause_reason", reason);
    }
    let mut s = Sql::new("UPDATE jobs SET ");
    // A caller's change: the revision an edit checks moves too.
    s.set(&set)
        .push(", version = version + 1, revision = revision + 1");
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
        cancel_pending(&mut tx, &job, now).await?;
        stop::request_for_job(&mut tx, &job.id, now).await?;
    }
    tx.commit().await?;
    Ok(ControlOutcome::Done(job))
}

/// Cancels the job's pending executions, with their events and callbacks.
async fn cancel_pending(tx: &mut Tx, job: &Job, now: Millis) -> StoreResult<()> {
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
async fn free_slot(tx: &mut Tx, job_id: &str, now: Millis) -> StoreResult<Millis> {
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

/// `job_trigger_now`'s transaction: an execution due at the first free
/// trigger time from `now`, if the job may fire.
pub(super) async fn trigger_now(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    execution_id: &str,
    now: Millis,
) -> StoreResult<ControlOutcome> {
    let Some(job) = get_job(&mut tx, tenant, id, true).await? else {
        return Ok(ControlOutcome::NotFound);
    };
    // A manual trigger fires where a scheduled one could: the states a
    // claim may start from (not paused, not terminal). The job's own
    // state is left alone, so its schedule carries on.
    if !JobTransition::Claim.allowed_from(job.status) {
        return Ok(ControlOutcome::Conflict(job));
    }
    let at = free_slot(&mut tx, &job.id, now).await?;
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
