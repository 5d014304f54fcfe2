//! The dispatcher's hot path reads: the due scan and the scan for
//! unpublished work (claims are in `claim`).

use super::error::db_err;
use super::rows::{self, JOB_COLS, R, select_list};
use super::stmt::{bind_names, marks, q};
use super::{Dialect, SqlStore};
use kairos_core::execution::ExecTransition;
use kairos_core::job::JobTransition;
use kairos_core::store::{DispatchWork, StoreResult};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;

/// The due-trigger scan in `dialect`'s placeholders. Binds, in order: each
/// name of `JobTransition::Claim.from_states()`, `now`, the limit. Public so
/// that operators and tests can `EXPLAIN` exactly what runs: it must read
/// through the `(status, next_trigger_at)` index `idx_jobs_status_next`.
pub fn due_scan_sql(dialect: Dialect) -> String {
    dialect.placeholders(&due_scan())
}

/// The due-trigger scan, written with `?`.
fn due_scan() -> String {
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
        worker_group: r.opt_string("worker_group")?,
        trace: r.trace()?,
    })
}

/// ` AND (…)` restricting pending work to what some live worker can run, with
/// its values in bind order; `None` when nothing can run (no query needed).
/// One disjunct per distinct (handlers, group) announcement: the job's group
/// must be absent or that group, and its handler one of those handlers (any,
/// for a legacy worker).
fn routable_filter(routable: &Routable) -> Option<(String, Vec<String>)> {
    let list = match routable {
        Routable::Any => return Some((String::new(), Vec::new())),
        Routable::Only(list) if list.is_empty() => return None,
        Routable::Only(list) => list,
    };
    let mut parts = Vec::with_capacity(list.len());
    let mut binds = Vec::new();
    for s in list {
        let mut part = match &s.group {
            Some(g) => {
                binds.push(g.clone());
                "(j.worker_group IS NULL OR j.worker_group = ?)".to_string()
            }
            None => "j.worker_group IS NULL".to_string(),
        };
        if let Some(handlers) = &s.handlers {
            if handlers.is_empty() {
                continue;
            }
            part.push_str(&format!(" AND j.handler IN ({})", marks(handlers.len())));
            binds.extend(handlers.iter().cloned());
        }
        parts.push(format!("({part})"));
    }
    if parts.is_empty() {
        return None;
    }
    Some((format!(" AND ({})", parts.join(" OR ")), binds))
}

impl SqlStore {
    pub(crate) async fn find_due(
        &self,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<kairos_core::job::Job>> {
        let query = bind_names(
            q(self.dialect(), due_scan()),
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
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        let Some((filter, binds)) = routable_filter(routable) else {
            return Ok(Vec::new());
        };
        let from = ExecTransition::Dispatch.from_states();
        let sql = format!(
            "SELECT e.id AS id, e.job_id AS job_id, e.tenant AS tenant, e.attempt AS attempt, \
             e.scheduled_at AS scheduled_at, j.handler AS handler, j.params AS params, \
             j.timeout_ms AS timeout_ms, j.worker_group AS worker_group, \
             j.trace_context AS trace_context \
             FROM executions e JOIN jobs j ON j.id = e.job_id \
             WHERE e.status IN ({}) AND e.not_before <= ?{filter} ORDER BY e.not_before LIMIT ?",
            marks(from.len())
        );
        let mut query =
            bind_names(q(self.dialect(), sql), from.iter().map(|s| s.as_str())).bind(now);
        for b in binds {
            query = query.bind(b);
        }
        let found = query
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(work).collect()
    }
}
