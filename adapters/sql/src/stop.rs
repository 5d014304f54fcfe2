//! Stop requests: a cancelled job's or a replaced execution's attempt that a
//! worker may be running gets `stop_requested_at` (durably, in the
//! transaction that decided it); one that no worker has yet is cancelled at
//! once. Workers learn about requests through `executions_stop_requested`.

use super::error::db_err;
use super::rows::R;
use super::stmt::{CHUNK, bind_names, marks, q};
use super::{Dialect, SqlStore};
use kairos_core::execution::{ExecStatus, ExecTransition, Execution};
use kairos_core::store::{StopRequest, StoreResult};
use kairos_core::time::Millis;
use sqlx::AnyConnection;

/// States in which a worker may hold the attempt: it has to be told to stop.
const HELD: [ExecStatus; 2] = [ExecStatus::Dispatched, ExecStatus::Running];

/// Cancels the pending executions among `live` (they never reached a worker)
/// with `reason`, and requests a stop for the others. Returns the cancelled
/// ones as they are now, for their events and callbacks.
pub(crate) async fn replace(
    conn: &mut AnyConnection,
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
    let from = t.from_states();
    let mut cancelled = Vec::with_capacity(pending.len());
    for chunk in pending.chunks(CHUNK) {
        let sql = format!(
            "UPDATE executions SET status = ?, error = ?, finished_at = ?, updated_at = ? \
             WHERE id IN ({}) AND status IN ({})",
            marks(chunk.len()),
            marks(from.len())
        );
        let mut query = q(Dialect::of(conn), sql)
            .bind(t.to_state().as_str())
            .bind(reason.to_string())
            .bind(now)
            .bind(now);
        for e in chunk {
            query = query.bind(e.id.as_str());
        }
        bind_names(query, from.iter().map(|s| s.as_str()))
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
        // The rows were read with a lock (MySQL) or under SQLite's single
        // writer, so every one of them moved.
        cancelled.extend(chunk.iter().map(|e| Execution {
            status: t.to_state(),
            error: Some(reason.to_string()),
            finished_at: Some(now),
            ..(*e).clone()
        }));
    }
    request_by_ids(conn, &held, now).await?;
    Ok(cancelled)
}

/// Sets `stop_requested_at` on the named executions a worker may hold, unless
/// a stop was already requested.
async fn request_by_ids(conn: &mut AnyConnection, ids: &[&str], now: Millis) -> StoreResult<u64> {
    let mut changed = 0;
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "UPDATE executions SET stop_requested_at = ?, updated_at = ? WHERE id IN ({}) \
             AND status IN ({}) AND stop_requested_at IS NULL",
            marks(chunk.len()),
            marks(HELD.len())
        );
        let mut query = q(Dialect::of(conn), sql).bind(now).bind(now);
        for id in chunk {
            query = query.bind(*id);
        }
        changed += bind_names(query, HELD.iter().map(|s| s.as_str()))
            .execute(&mut *conn)
            .await
            .map_err(db_err)?
            .rows_affected();
    }
    Ok(changed)
}

/// Requests a stop for every attempt of `job_id` a worker may hold.
pub(crate) async fn request_for_job(
    conn: &mut AnyConnection,
    job_id: &str,
    now: Millis,
) -> StoreResult<u64> {
    let sql = format!(
        "UPDATE executions SET stop_requested_at = ?, updated_at = ? WHERE job_id = ? \
         AND status IN ({}) AND stop_requested_at IS NULL",
        marks(HELD.len())
    );
    let query = q(Dialect::of(conn), sql).bind(now).bind(now).bind(job_id);
    Ok(bind_names(query, HELD.iter().map(|s| s.as_str()))
        .execute(conn)
        .await
        .map_err(db_err)?
        .rows_affected())
}

impl SqlStore {
    pub(crate) async fn stop_requested(
        &self,
        since: Millis,
        limit: u32,
    ) -> StoreResult<Vec<StopRequest>> {
        let sql = format!(
            "SELECT id, attempt, worker_id, stop_requested_at FROM executions \
             WHERE stop_requested_at >= ? AND status IN ({}) \
             ORDER BY stop_requested_at, id LIMIT ?",
            marks(HELD.len())
        );
        let query = bind_names(
            q(self.dialect(), sql).bind(since),
            HELD.iter().map(|s| s.as_str()),
        );
        let found = query
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found
            .iter()
            .map(|row| {
                let r = R::new(row, "executions");
                Ok(StopRequest {
                    execution_id: r.string("id")?,
                    attempt: r.u32("attempt")?,
                    worker_id: r.opt_string("worker_id")?,
                    requested_at: r.i64("stop_requested_at")?,
                })
            })
            .collect()
    }
}
