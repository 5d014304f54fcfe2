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
use kairos_core::shard::ExecutionMode;
use kairos_core::store::{ControlOutcome, StoreResult};
use kairos_core::time::Millis;
use kairos_core::worker::WorkerState;
use kairos_core::workflow::budget::RunLimits;

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
    limits: RunLimits,
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
        return tx.unchanged(ControlOutcome::NotFound).await;
    };
    if !moved {
        return tx.unchanged(ControlOutcome::Conflict(job)).await;
    }
    if t == JobTransition::Cancel {
        cancel_pending(&mut tx, &job, now, limits).await?;
        stop::request_for_job(&mut tx, &job.id, now).await?;
    }
    tx.commit().await?;
    Ok(ControlOutcome::Done(job))
}

/// Cancels the job's pending executions, with their events and callbacks.
async fn cancel_pending(tx: &mut Tx, job: &Job, now: Millis, limits: RunLimits) -> StoreResult<()> {
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
    inserts::callbacks(tx, &callbacks).await?;
    // Issue 34: a workflow node's internal job cancelled by hand ends its
    // pending node executions; their runs move on (the nodes cancelled).
    let ended: Vec<&kairos_core::execution::Execution> = execs.iter().collect();
    crate::workflows::on_settled(tx, &ended, now, limits).await?;
    Ok(())
}

/// The first free trigger time at or after `now` for a manual trigger
/// (a trigger's executions are unique per `(job_id, scheduled_at,
/// shard_index)`: a free time has none).
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
        return tx.unchanged(ControlOutcome::NotFound).await;
    };
    // A manual trigger fires where a scheduled one could: the states a
    // claim may start from (not paused, not terminal). The job's own
    // state is left alone, so its schedule carries on.
    if !JobTransition::Claim.allowed_from(job.status) {
        return tx.unchanged(ControlOutcome::Conflict(job)).await;
    }
    let at = free_slot(&mut tx, &job.id, now).await?;
    let pending = ExecStatus::Pending;
    let count = shards_of(&mut tx, &job, now).await?;
    // Shard 0 is the execution the caller is told of; the others of a
    // broadcast or sharded job get ids of their own.
    let ids: Vec<String> = (0..count)
        .map(|i| match i {
            0 => execution_id.to_string(),
            _ => uuid::Uuid::now_v7().to_string(),
        })
        .collect();
    let rows: Vec<Fields> = ids
        .iter()
        .zip(0_u32..)
        .map(|(id, index)| {
            Fields::new()
                .with("id", id.as_str())
                .with("job_id", job.id.as_str())
                .with("tenant", job.tenant.as_str())
                .with("scheduled_at", time(at))
                .with("attempt", 1_i64)
                .with("status", pending.as_str())
                .with("not_before", time(at))
                .with("created_at", time(now))
                .with("updated_at", time(now))
                .with("shard_index", index)
                .with("shard_count", count)
        })
        .collect();
    for chunk in rows.chunks(CHUNK) {
        Sql::new("INSERT INTO executions")
            .rows(chunk)
            .execute(&mut tx)
            .await?;
    }
    let events: Vec<EventRow> = ids
        .iter()
        .map(|id| EventRow::plain(id, 1, pending, now))
        .collect();
    inserts::events(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(ControlOutcome::Done(job))
}

/// How long after its last heartbeat a worker counts as alive for a manual
/// trigger of a broadcast job (the dispatcher's default threshold).
const LIVE_WORKER_MS: Millis = 15_000;

/// Executions one manual trigger of `job` makes: `shardCount` for a sharded
/// job; for a broadcast job, one per live worker serving it now (at least
/// one, which waits for a worker like a single job's). They are `pending`,
/// and each is placed by the dispatcher's balancer when published.
async fn shards_of(tx: &mut Tx, job: &Job, now: Millis) -> StoreResult<u32> {
    match job.execution_mode {
        ExecutionMode::Single => Ok(1),
        ExecutionMode::Sharded { count } => Ok(count.max(1)),
        ExecutionMode::Broadcast => {
            let found = Sql::new(
                "SELECT id, queue, capacity, active, avg_cost_ms, cpu_idle, state, \
                 last_heartbeat_at, registered_at, handlers, worker_group, dispatch_batch, immediate_queue \
                 FROM workers WHERE state = ",
            )
            .bind(WorkerState::Online.as_str())
            .push(" AND last_heartbeat_at >= ")
            .bind(time(now - LIVE_WORKER_MS))
            .fetch_all(&mut *tx)
            .await?;
            let mut live = 0_u32;
            for row in &found {
                let w = rows::worker(row)?;
                if w.serves.accepts(&job.handler, job.worker_group.as_deref()) {
                    live += 1;
                }
            }
            Ok(live.max(1))
        }
    }
}
