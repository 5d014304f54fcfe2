//! The purge statements: which rows of a kind of history are past their
//! retention (`candidates`, one index range per tenant, oldest first) and
//! the transaction deleting a batch of them with what hangs off them.
//!
//! Child rows go before their parents (the foreign keys of MySQL and
//! PostgreSQL, and SQLite's, refuse the other order): an execution's
//! delivery attempts, deliveries, events, log lines and concurrency slots,
//! then the execution; a job's follow-up rows, then the job; a run's
//! delivery attempts, deliveries and node rows, then the run. The final
//! `DELETE` of each batch checks again what made its rows candidates
//! (terminal states), so a row that changed since it was picked stays.

use crate::db::Tx;
use crate::rows::R;
use crate::sql::{Sql, time};
use crate::store::SqlStore;
use kairos_core::callback::CallbackState;
use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::retention::History;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::RunStatus;

fn exec_terminal() -> impl Iterator<Item = &'static str> {
    ExecStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
}

fn job_terminal() -> impl Iterator<Item = &'static str> {
    JobStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
}

fn run_terminal() -> impl Iterator<Item = &'static str> {
    RunStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
}

/// Appends the `SELECT` of up to `limit` ids of `kind` past `before`,
/// oldest first (column `id`). Each reads one index range: executions'
/// `(tenant, finished_at)`, jobs' `(tenant, status, updated_at)`, runs'
/// `(tenant, finished_at)`, the audit's `(tenant, at)` and sessions'
/// `(expires_at)`; the `NOT EXISTS` checks are point lookups.
pub(super) fn candidates(
    s: &mut Sql,
    kind: History,
    tenant: Option<&str>,
    before: Millis,
    limit: u32,
) {
    let tenant_is = |s: &mut Sql, col: &'static str| {
        if let Some(t) = tenant {
            s.push(col).bind(t);
        }
    };
    match kind {
        History::Executions => {
            s.push("SELECT e.id AS id FROM executions e WHERE e.finished_at < ")
                .bind(time(before));
            tenant_is(s, " AND e.tenant = ");
            s.push(" AND e.status IN ")
                .list(exec_terminal())
                // A node's output feeds the nodes after it until its run ends.
                .push(
                    " AND NOT EXISTS (SELECT 1 FROM workflow_run_nodes n \
                     JOIN workflow_runs r ON r.id = n.run_id \
                     WHERE n.execution_id = e.id AND r.finished_at IS NULL)",
                )
                // A delivery still being tried needs its execution.
                .push(" AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.execution_id = e.id AND c.state = ")
                .bind(CallbackState::Pending.as_str())
                .push(") ORDER BY e.finished_at LIMIT ")
                .bind(i64::from(limit));
        }
        History::Jobs => {
            s.push("SELECT j.id AS id FROM jobs j WHERE j.updated_at < ")
                .bind(time(before));
            tenant_is(s, " AND j.tenant = ");
            s.push(" AND j.status IN ")
                .list(job_terminal())
                .push(" AND j.schedule_kind = ")
                .bind("once")
                // A workflow's node jobs go with their workflow, a child
                // job stays for its parent's follow-ups, and a job's
                // executions go first, after their own retention.
                .push(
                    " AND j.workflow_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM job_followups f WHERE f.child_id = j.id) \
                     AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.id) \
                     ORDER BY j.updated_at LIMIT ",
                )
                .bind(i64::from(limit));
        }
        History::WorkflowRuns => {
            s.push("SELECT r.id AS id FROM workflow_runs r WHERE r.finished_at < ")
                .bind(time(before));
            tenant_is(s, " AND r.tenant = ");
            s.push(" AND r.status IN ")
                .list(run_terminal())
                .push(" AND NOT EXISTS (SELECT 1 FROM callbacks c WHERE c.workflow_run_id = r.id AND c.state = ")
                .bind(CallbackState::Pending.as_str())
                .push(") ORDER BY r.finished_at LIMIT ")
                .bind(i64::from(limit));
        }
        History::Audit => {
            s.push("SELECT a.id AS id FROM audit_log a WHERE a.at < ")
                .bind(time(before));
            tenant_is(s, " AND a.tenant = ");
            s.push(" ORDER BY a.at LIMIT ").bind(i64::from(limit));
        }
        History::Sessions => {
            s.push("SELECT u.id_hash AS id FROM ui_sessions u WHERE u.expires_at < ")
                .bind(time(before))
                .push(" ORDER BY u.expires_at LIMIT ")
                .bind(i64::from(limit));
        }
    }
}

/// `history_purge`: picks the batch, then deletes it in one transaction.
pub(super) async fn purge(
    store: &SqlStore,
    kind: History,
    tenant: Option<&str>,
    before: Millis,
    limit: u32,
) -> StoreResult<u64> {
    let mut s = Sql::new("");
    candidates(&mut s, kind, tenant, before, limit);
    // Picked on the primary: a replica's lag could miss a delivery queued
    // a moment ago.
    let found = s.fetch_all(store.write()).await?;
    if found.is_empty() {
        return Ok(0);
    }
    if kind == History::Audit {
        let ids = found
            .iter()
            .map(|row| R::new(row, "audit_log").i64("id"))
            .collect::<StoreResult<Vec<i64>>>()?;
        return Sql::new("DELETE FROM audit_log WHERE id IN ")
            .list(ids)
            .execute(store.write())
            .await;
    }
    let ids = found
        .iter()
        .map(|row| R::new(row, kind.as_str()).string("id"))
        .collect::<StoreResult<Vec<String>>>()?;
    if kind == History::Sessions {
        return Sql::new("DELETE FROM ui_sessions WHERE id_hash IN ")
            .list(ids.iter().map(String::as_str))
            .execute(store.write())
            .await;
    }
    store.transaction(|tx| delete(tx, kind, &ids)).await
}

/// Drops the follow-up chain rows of purged executions: their membership
/// (their results were applied, so no follow-up looks them up again) and
/// each chain whose last member this was. Without it the chain tables
/// would grow by a row per follow-up forever.
async fn forget_chains<'a>(
    tx: &mut Tx,
    ids: impl Iterator<Item = &'a str> + Clone,
) -> StoreResult<()> {
    let found =
        Sql::new("SELECT DISTINCT chain_id FROM followup_chain_jobs WHERE execution_id IN ")
            .list(ids.clone())
            .fetch_all(&mut *tx)
            .await?;
    if found.is_empty() {
        return Ok(());
    }
    let chains = found
        .iter()
        .map(|row| R::new(row, "followup_chain_jobs").string("chain_id"))
        .collect::<StoreResult<Vec<String>>>()?;
    Sql::new("DELETE FROM followup_chain_jobs WHERE execution_id IN ")
        .list(ids)
        .execute(&mut *tx)
        .await?;
    Sql::new("DELETE FROM followup_chains WHERE chain_id IN ")
        .list(chains.iter().map(String::as_str))
        .push(
            " AND NOT EXISTS (SELECT 1 FROM followup_chain_jobs j \
             WHERE j.chain_id = followup_chains.chain_id)",
        )
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Deletes the rows of `ids` (executions, jobs or runs) and their children.
async fn delete(mut tx: Tx, kind: History, ids: &[String]) -> StoreResult<u64> {
    let ids = || ids.iter().map(String::as_str);
    let purged = match kind {
        History::Executions => {
            Sql::new(
                "DELETE FROM callback_attempts WHERE callback_id IN \
                 (SELECT id FROM callbacks WHERE execution_id IN ",
            )
            .list(ids())
            .push(")")
            .execute(&mut tx)
            .await?;
            forget_chains(&mut tx, ids()).await?;
            for table in [
                "DELETE FROM callbacks WHERE execution_id IN ",
                "DELETE FROM execution_events WHERE execution_id IN ",
                "DELETE FROM execution_logs WHERE execution_id IN ",
                "DELETE FROM concurrency_slots WHERE execution_id IN ",
            ] {
                Sql::new(table).list(ids()).execute(&mut tx).await?;
            }
            Sql::new("DELETE FROM executions WHERE id IN ")
                .list(ids())
                .push(" AND status IN ")
                .list(exec_terminal())
                .execute(&mut tx)
                .await?
        }
        History::Jobs => {
            Sql::new("DELETE FROM job_followups WHERE job_id IN ")
                .list(ids())
                .execute(&mut tx)
                .await?;
            Sql::new("DELETE FROM jobs WHERE id IN ")
                .list(ids())
                .push(" AND status IN ")
                .list(job_terminal())
                .execute(&mut tx)
                .await?
        }
        History::WorkflowRuns => {
            Sql::new(
                "DELETE FROM callback_attempts WHERE callback_id IN \
                 (SELECT id FROM callbacks WHERE workflow_run_id IN ",
            )
            .list(ids())
            .push(")")
            .execute(&mut tx)
            .await?;
            Sql::new("DELETE FROM callbacks WHERE workflow_run_id IN ")
                .list(ids())
                .execute(&mut tx)
                .await?;
            Sql::new("DELETE FROM workflow_run_nodes WHERE run_id IN ")
                .list(ids())
                .execute(&mut tx)
                .await?;
            Sql::new("DELETE FROM workflow_runs WHERE id IN ")
                .list(ids())
                .push(" AND status IN ")
                .list(run_terminal())
                .execute(&mut tx)
                .await?
        }
        History::Audit | History::Sessions => 0,
    };
    tx.commit().await?;
    Ok(purged)
}
