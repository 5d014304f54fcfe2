//! The dispatcher's hot path reads: the due scan and the scan for
//! unpublished work (claims are in `claim`).

use super::SqlStore;
use super::error::db_err;
use super::rows::{self, JOB_COLS, R, select_list};
use super::stmt::{bind_names, marks, q};
use kairos_core::execution::ExecTransition;
use kairos_core::job::JobTransition;
use kairos_core::store::{DispatchWork, StoreResult};
use kairos_core::time::Millis;

/// The due-trigger scan. Binds, in order: each name of
/// `JobTransition::Claim.from_states()`, `now`, the limit. Public so that
/// operators and tests can `EXPLAIN` exactly what runs: it must read through
/// the `(status, next_trigger_at)` index `idx_jobs_status_next`.
pub fn due_scan_sql() -> String {
    format!(
        "SELECT {} FROM jobs j WHERE j.status IN ({}) AND j.next_trigger_at <= ? \
         ORDER BY j.next_trigger_at LIMIT ?",
        select_list("j", &JOB_COLS),
        marks(JobTransition::Claim.from_states().len())
    )
}

/// `DispatchWork` from a row carrying the execution and job columns it needs.
fn work(row: &sqlx::any::AnyRow) -> StoreResult<DispatchWork> {
    let r = R::new(row, "executions");
    Ok(DispatchWork {
        execution_id: r.string("id")?,
        job_id: r.string("job_id")?,
        tenant: r.string("tenant")?,
        attempt: r.u32("attempt")?,
        handler: r.string("handler")?,
        params: r.json("params")?,
        scheduled_at: r.i64("scheduled_at")?,
        timeout_ms: r.opt_u64("timeout_ms")?,
    })
}

impl SqlStore {
    pub(crate) async fn find_due(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<kairos_core::job::Job>> {
        let query = bind_names(
            q(due_scan_sql()),
            JobTransition::Claim
                .from_states()
                .iter()
                .map(|s| s.as_str()),
        );
        let found = query
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(rows::job).collect()
    }

    pub(crate) async fn find_unpublished(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<DispatchWork>> {
        let from = ExecTransition::Dispatch.from_states();
        let sql = format!(
            "SELECT e.id AS id, e.job_id AS job_id, e.tenant AS tenant, e.attempt AS attempt, \
             e.scheduled_at AS scheduled_at, j.handler AS handler, j.params AS params, \
             j.timeout_ms AS timeout_ms FROM executions e JOIN jobs j ON j.id = e.job_id \
             WHERE e.status IN ({}) AND e.not_before <= ? ORDER BY e.not_before LIMIT ?",
            marks(from.len())
        );
        let found = bind_names(q(sql), from.iter().map(|s| s.as_str()))
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(work).collect()
    }
}
