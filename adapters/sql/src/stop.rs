//! Stop requests: a cancelled job's or a replaced execution's attempt that a
//! worker may be running gets `stop_requested_at` (durably, in the
//! transaction that decided it); one that no worker has yet is cancelled at
//! once. Workers learn about requests through `executions_stop_requested`.

use crate::db::Tx;
use crate::dialect::Dialect;
use crate::sql::{CHUNK, Fields, Sql, time};
use kairos_core::execution::{ExecStatus, ExecTransition, Execution};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;

/// States in which a worker may hold the attempt: it has to be told to stop.
const HELD: [ExecStatus; 2] = [ExecStatus::Dispatched, ExecStatus::Running];

/// The names of [`HELD`], for an `IN` list.
fn held_names() -> impl Iterator<Item = &'static str> {
    HELD.into_iter().map(ExecStatus::as_str)
}

/// Cancels the pending executions among `live` (they never reached a worker)
/// with `reason`, and requests a stop for the others. Returns the cancelled
/// ones as they are now, for their events and callbacks.
pub(crate) async fn replace(
    tx: &mut Tx,
    live: &[Execution],
    reason: &str,
    now: Millis,
) -> StoreResult<Vec<Execution>> {
    let t = ExecTransition::Cancel;
    let pending: Vec<&Execution> = live.iter().filter(|e| t.allowed_from(e.status)).collect();
    let held: Vec<&str> = live
        .iter()
        .filter(|e| HELD.contains(&e.status))
        .map(|e| e.id.as_str())
        .collect();
    let set = Fields::new()
        .with("status", t.to_state().as_str())
        .with("error", reason)
        .with("finished_at", time(now))
        .with("updated_at", time(now));
    let mut cancelled = Vec::with_capacity(pending.len());
    for chunk in pending.chunks(CHUNK) {
        Sql::new("UPDATE executions SET ")
            .set(&set)
            .push(" WHERE id IN ")
            .list(chunk.iter().map(|e| e.id.as_str()))
            .push(" AND status IN ")
            .list(t.from_states().iter().map(|st| st.as_str()))
            .execute(&mut *tx)
            .await?;
        // The rows were read with a lock (MySQL) or under SQLite's single
        // writer, so every one of them moved.
        cancelled.extend(chunk.iter().map(|e| Execution {
            status: t.to_state(),
            error: Some(reason.to_string()),
            finished_at: Some(now),
            ..(*e).clone()
        }));
    }
    request_by_ids(tx, &held, now).await?;
    Ok(cancelled)
}

/// `stop_requested_at` and `updated_at` for a stop requested at `now`.
fn stop_fields(now: Millis) -> Fields {
    Fields::new()
        .with("stop_requested_at", time(now))
        .with("updated_at", time(now))
}

/// Sets `stop_requested_at` on the named executions a worker may hold, unless
/// a stop was already requested.
pub(crate) async fn request_by_ids(tx: &mut Tx, ids: &[&str], now: Millis) -> StoreResult<u64> {
    let set = stop_fields(now);
    let mut changed = 0;
    for chunk in ids.chunks(CHUNK) {
        changed += Sql::new("UPDATE executions SET ")
            .set(&set)
            .push(" WHERE id IN ")
            .list(chunk.iter().copied())
            .push(" AND status IN ")
            .list(held_names())
            .push(" AND stop_requested_at IS NULL")
            .execute(&mut *tx)
            .await?;
    }
    Ok(changed)
}

/// Requests a stop for every attempt of `job_id` a worker may hold.
pub(crate) async fn request_for_job(tx: &mut Tx, job_id: &str, now: Millis) -> StoreResult<u64> {
    Sql::new("UPDATE executions SET ")
        .set(&stop_fields(now))
        .push(" WHERE job_id = ")
        .bind(job_id)
        .push(" AND status IN ")
        .list(held_names())
        .push(" AND stop_requested_at IS NULL")
        .execute(tx)
        .await
}

/// The workers' poll for stop requests as `dialect` runs it. Binds, in
/// order: `since` (a time), the names of the held states (dispatched,
/// running), the limit. Public so that tests can `EXPLAIN` it: it must read
/// the few requests through `idx_executions_stop_requested`, not every
/// execution a worker holds.
pub fn stop_requests_sql(dialect: Dialect) -> String {
    stop_requests(0, 0).text(dialect)
}

/// The workers' poll for stop requests: see [`stop_requests_sql`].
pub(crate) fn stop_requests(since: Millis, limit: u32) -> Sql {
    let mut s = Sql::new(
        "SELECT id, attempt, worker_id, stop_requested_at FROM executions \
         WHERE stop_requested_at >= ",
    );
    s.bind(time(since))
        // SQLite, which keeps no statistics, would otherwise read every
        // dispatched and running execution through the status index and
        // sort them, on each poll; `+status` leaves it the range on
        // `stop_requested_at`, which holds only the few requests.
        .dialect(" AND status IN ", " AND status IN ", " AND +status IN ")
        .list(held_names())
        .push(" ORDER BY stop_requested_at, id LIMIT ")
        .bind(i64::from(limit));
    s
}
