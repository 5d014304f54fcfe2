//! [`ExecutionStore`]: the hot-path writes (in `dispatch` and `apply`) and the
//! reads behind the reaper and the API's execution history.

use super::SqlStore;
use super::apply::Input;
use super::db::Row;
use super::jobs::page_size;
use super::rows::{self, EXEC_COLS, R};
use super::sql::{Sql, time};
use async_trait::async_trait;
use kairos_core::execution::{ExecEvent, ExecStatus, ExecTransition, Execution};
use kairos_core::job::Job;
use kairos_core::outcome::Verdict;
use kairos_core::protocol::{ResultMsg, incarnation_id};
use kairos_core::store::{
    Applied, Claim, DispatchWork, DispatchedTo, ExecutionStore, HeldAttempt, Marked, Page,
    StopRequest, StoreResult,
};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;

/// `SELECT <every execution column> FROM executions e`.
fn exec_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("e", &EXEC_COLS).push(" FROM executions e");
    s
}

/// `(execution_id, attempt)` pairs from rows with `id` and `attempt`.
fn attempts(found: &[Row]) -> StoreResult<Vec<(String, u32)>> {
    found
        .iter()
        .map(|row| {
            let r = R::new(row, "executions");
            Ok((r.string("id")?, r.u32("attempt")?))
        })
        .collect()
}

#[async_trait]
impl ExecutionStore for SqlStore {
    async fn jobs_find_due(
        &self,
        now: Millis,
        limit: u32,
        except: &[&str],
    ) -> StoreResult<Vec<Job>> {
        self.find_due(now, limit, except).await
    }

    async fn jobs_count_due(&self, until: Millis, cap: u32) -> StoreResult<u32> {
        self.count_due(until, cap).await
    }

    async fn triggers_claim(
        &self,
        fence: u64,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.claim(fence, claims, now).await
    }

    async fn executions_find_unpublished(
        &self,
        now: Millis,
        limit: u32,
        routable: &Routable,
    ) -> StoreResult<Vec<DispatchWork>> {
        self.find_unpublished(now, limit, routable).await
    }

    async fn executions_mark_dispatched(
        &self,
        sent: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Marked> {
        self.mark_dispatched(sent, now).await
    }

    async fn execution_mark_rerouted(
        &self,
        sent: &DispatchedTo,
        reason: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        self.mark_rerouted(sent, reason, now).await
    }

    async fn results_apply(&self, results: &[ResultMsg], now: Millis) -> StoreResult<Vec<Applied>> {
        let inputs: Vec<Input<'_>> = results
            .iter()
            .map(|r| Input {
                execution_id: &r.execution_id,
                attempt: r.attempt,
                verdict: Verdict::of_result(r),
                worker_id: Some(&r.worker_id),
                incarnation: incarnation_id(&r.incarnation),
                started_at: r.started_at,
                output: r.output.as_ref(),
                error: r.error.as_deref(),
                at: r.at,
            })
            .collect();
        self.apply(&inputs, now).await
    }

    async fn executions_apply_verdict(
        &self,
        targets: &[(String, u32)],
        verdict: Verdict,
        reason: &str,
        now: Millis,
    ) -> StoreResult<Vec<Applied>> {
        let inputs: Vec<Input<'_>> = targets
            .iter()
            .map(|(id, attempt)| Input {
                execution_id: id,
                attempt: *attempt,
                verdict,
                worker_id: None,
                incarnation: None,
                started_at: None,
                output: None,
                error: Some(reason),
                at: now,
            })
            .collect();
        self.apply(&inputs, now).await
    }

    async fn executions_requeue_unstarted(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        self.requeue_unstarted(targets, reason, now).await
    }

    async fn executions_in_flight_on(&self, worker_id: &str) -> StoreResult<Vec<HeldAttempt>> {
        // What a worker holds is exactly what losing it may move.
        let from = ExecTransition::Lose.from_states();
        let found = Sql::new(
            "SELECT id, attempt, status, incarnation, dispatched_at, started_at FROM executions \
             WHERE worker_id = ",
        )
        .bind(worker_id)
        .push(" AND status IN ")
        .list(from.iter().map(|s| s.as_str()))
        .push(" ORDER BY id")
        .fetch_all(self.read())
        .await?;
        found
            .iter()
            .map(|row| {
                let r = R::new(row, "executions");
                Ok(HeldAttempt {
                    execution_id: r.string("id")?,
                    attempt: r.u32("attempt")?,
                    status: r.exec_status("status")?,
                    incarnation: r.opt_string("incarnation")?,
                    dispatched_at: r.opt_time("dispatched_at")?,
                    started_at: r.opt_time("started_at")?,
                })
            })
            .collect()
    }

    async fn executions_find_overdue(
        &self,
        now: Millis,
        margin_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>> {
        // Only a started attempt has a deadline; a dispatched one that never
        // starts is the worker-death rule's business.
        let found = Sql::new("SELECT id, attempt FROM executions WHERE status = ")
            .bind(ExecStatus::Running.as_str())
            .push(" AND deadline_at IS NOT NULL AND deadline_at < ")
            .bind(time(now.saturating_sub(margin_ms)))
            .push(" ORDER BY deadline_at LIMIT ")
            .bind(limit)
            .fetch_all(self.read())
            .await?;
        attempts(&found)
    }

    async fn executions_find_unbounded(
        &self,
        now: Millis,
        limit_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<(String, u32)>> {
        // A started attempt counts from its start, an unstarted one from its
        // dispatch; attempts with a time limit of their own are the
        // deadline's business.
        let found = Sql::new("SELECT id, attempt FROM executions WHERE status IN (")
            .bind(ExecStatus::Dispatched.as_str())
            .push(", ")
            .bind(ExecStatus::Running.as_str())
            .push(") AND deadline_at IS NULL AND COALESCE(started_at, dispatched_at) < ")
            .bind(time(now.saturating_sub(limit_ms)))
            .push(" ORDER BY COALESCE(started_at, dispatched_at) LIMIT ")
            .bind(limit)
            .fetch_all(self.read())
            .await?;
        attempts(&found)
    }

    async fn execution_get(&self, tenant: &str, id: &str) -> StoreResult<Option<Execution>> {
        let row = exec_select()
            .push(" WHERE e.tenant = ")
            .bind(tenant)
            .push(" AND e.id = ")
            .bind(id)
            .fetch_optional(self.read())
            .await?;
        row.as_ref().map(rows::execution).transpose()
    }

    async fn executions_list_for_job(
        &self,
        tenant: &str,
        job_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<Execution>> {
        let limit = page_size(limit);
        let after = match rows::page_start(cursor) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut sql = exec_select();
        sql.push(" WHERE e.job_id = ")
            .bind(job_id)
            .push(" AND e.tenant = ")
            .bind(tenant);
        self.executions_page(sql, after, limit).await
    }

    async fn executions_list(
        &self,
        tenant: &str,
        filter: &kairos_core::overview::ExecFilter,
    ) -> StoreResult<Page<Execution>> {
        self.list_executions(tenant, filter).await
    }

    async fn tenant_overview(
        &self,
        tenant: &str,
        since: Millis,
    ) -> StoreResult<kairos_core::overview::Overview> {
        self.overview(tenant, since).await
    }

    async fn execution_events(&self, tenant: &str, id: &str) -> StoreResult<Vec<ExecEvent>> {
        let found = Sql::new(
            "SELECT ev.execution_id AS execution_id, ev.attempt AS attempt, \
             ev.status AS status, ev.worker_id AS worker_id, ev.error AS error, \
             ev.occurred_at AS occurred_at FROM execution_events ev \
             JOIN executions e ON e.id = ev.execution_id WHERE e.tenant = ",
        )
        .bind(tenant)
        .push(" AND e.id = ")
        .bind(id)
        .push(" ORDER BY ev.id")
        .fetch_all(self.read())
        .await?;
        found.iter().map(rows::event).collect()
    }

    async fn executions_stop_requested(
        &self,
        since: Millis,
        limit: u32,
    ) -> StoreResult<Vec<StopRequest>> {
        self.stop_requested(since, limit).await
    }
}

impl SqlStore {
    /// A page of executions, newest trigger first: `sql` selects from
    /// `executions e` with its own conditions (and their values bound);
    /// the keyset condition after `after`, the order and the limit are added
    /// here, one row more than `limit` telling whether a next page exists.
    pub(crate) async fn executions_page(
        &self,
        mut sql: Sql,
        after: Option<(Millis, String)>,
        limit: u32,
    ) -> StoreResult<Page<Execution>> {
        if let Some((at, id)) = after {
            sql.push(" AND (e.scheduled_at < ")
                .bind(time(at))
                .push(" OR (e.scheduled_at = ")
                .bind(time(at))
                .push(" AND e.id < ")
                .bind(id)
                .push("))");
        }
        sql.push(" ORDER BY e.scheduled_at DESC, e.id DESC LIMIT ")
            .bind(i64::from(limit) + 1);
        let found = sql.fetch_all(self.read()).await?;
        let items = found
            .iter()
            .map(rows::execution)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(rows::page(items, limit, |e| {
            (e.scheduled_at, e.id.as_str())
        }))
    }
}
