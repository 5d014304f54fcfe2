//! [`Maintenance`]: the reaper's and recovery's calls — attempts past their
//! time limit or the deployment's default, what a worker holds, verdicts
//! (through `crate::outcomes`), the requeue of attempts that never started
//! (`requeue`), and the stop requests workers must hear about.

mod requeue;

use crate::db::Row;
use crate::outcomes::{self, Input};
use crate::rows::R;
use crate::sql::{Sql, time};
use crate::stop::stop_requests;
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::outcome::Verdict;
use kairos_core::store::{Applied, HeldAttempt, Maintenance, StopRequest, StoreResult};
use kairos_core::time::Millis;

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
impl Maintenance for SqlStore {
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

    async fn executions_apply_verdict(
        &self,
        targets: &[(String, u32)],
        verdict: Verdict,
        reason: &str,
        now: Millis,
    ) -> StoreResult<Vec<Applied>> {
        if targets.is_empty() {
            return Ok(Vec::new());
        }
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
        self.transaction(|tx| outcomes::apply(tx, &inputs, now, self.run_limits()))
            .await
    }

    async fn executions_requeue_unstarted(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        if targets.is_empty() {
            return Ok(0);
        }
        self.transaction(|tx| requeue::requeue_unstarted(tx, targets, reason, now))
            .await
    }

    async fn executions_stop_requested(
        &self,
        since: Millis,
        limit: u32,
    ) -> StoreResult<Vec<StopRequest>> {
        let found = stop_requests(since, limit).fetch_all(self.read()).await?;
        found
            .iter()
            .map(|row| {
                let r = R::new(row, "executions");
                Ok(StopRequest {
                    execution_id: r.string("id")?,
                    attempt: r.u32("attempt")?,
                    worker_id: r.opt_string("worker_id")?,
                    requested_at: r.time("stop_requested_at")?,
                })
            })
            .collect()
    }
}
