//! Applying a [`Step`] to a run: the executions of the nodes that became due
//! (with their parents' outputs), the skipped nodes, and the run's end.
//!
//! Within the run's budgets (issue 44, [`RunLimits`]): a node is run only
//! while the run has made fewer executions than its budget, its parents'
//! outputs fit what one node may carry, and they fit what is left of the
//! run's parent-outputs budget (`workflow_runs.parent_outputs_bytes`, the
//! bytes copied so far; the run row is locked by the caller). A node refused
//! is settled `failed` at once, its execution recorded `failed` with the
//! reason as its error and no outputs stored, and the run is advanced again
//! in the same transaction (its children are decided as after any failure;
//! an `onFailure` edge may handle it).

use super::runs::{NodeRow, end_run, node_rows};
use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::rows::R;
use crate::sql::{Fields, Sql, fetch_chunked, from_u64, json, time};
use kairos_core::execution::ExecStatus;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{
    NodeStatus, NodeTransition, RunTransition, Step, StoredWorkflow, Workflow, WorkflowRun, advance,
};
use std::collections::HashMap;

/// Applies `step` to `run`: the due nodes' executions are created (pending,
/// due now, with their parents' outputs) or refused (see the module), the
/// skipped nodes recorded, and the run ended if the step says so. Each node
/// move is conditional on the node's state, and an execution is only
/// inserted for a node this call moved, so a step applied twice creates
/// nothing twice. `true` if it ended the run and queued its callback.
pub(super) async fn apply_step(
    tx: &mut Tx,
    run: &WorkflowRun,
    wf: &StoredWorkflow,
    nodes: &HashMap<String, NodeRow>,
    step: &Step,
    now: Millis,
    limits: RunLimits,
) -> StoreResult<bool> {
    let mut budget = Budget {
        started: nodes.values().filter(|n| n.execution_id.is_some()).count() as u64,
        stored: stored_bytes(tx, &run.id).await?,
        stored_before: 0,
        limits,
    };
    budget.stored_before = budget.stored;
    let mut nodes = nodes.clone();
    let mut step = step.clone();
    loop {
        let refused = create_due(tx, run, wf, &nodes, &step, now, &mut budget).await?;
        skip(tx, run, &step, now).await?;
        if !refused {
            break;
        }
        // A refused node failed: its children are decided now.
        nodes = node_rows(tx, &[run.id.as_str()])
            .await?
            .remove(&run.id)
            .unwrap_or_default();
        let states: HashMap<String, NodeStatus> =
            nodes.iter().map(|(id, r)| (id.clone(), r.status)).collect();
        step = advance(&wf.definition, &states);
    }
    if budget.stored != budget.stored_before {
        Sql::new("UPDATE workflow_runs SET parent_outputs_bytes = ")
            .bind(from_u64(budget.stored))
            .push(" WHERE id = ")
            .bind(run.id.as_str())
            .execute(&mut *tx)
            .await?;
    }
    match step.finished.and_then(RunTransition::ending_in) {
        Some(end) => end_run(tx, run, end, Some(wf), now).await,
        None => Ok(false),
    }
}

/// What a run has used of its budgets, as this transaction moves it.
struct Budget {
    /// Its nodes with an execution.
    started: u64,
    /// Bytes of parent outputs its executions hold.
    stored: u64,
    /// `stored` as it was read.
    stored_before: u64,
    limits: RunLimits,
}

/// The bytes of parent outputs `run` has stored so far.
async fn stored_bytes(tx: &mut Tx, run_id: &str) -> StoreResult<u64> {
    let found = Sql::new("SELECT parent_outputs_bytes FROM workflow_runs WHERE id = ")
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await?;
    match found {
        Some(row) => Ok(R::new(&row, "workflow_runs")
            .opt_u64("parent_outputs_bytes")?
            .unwrap_or_default()),
        None => Ok(0),
    }
}

/// Creates the executions of `step.due`, each within the budget or refused;
/// whether any was refused.
async fn create_due(
    tx: &mut Tx,
    run: &WorkflowRun,
    wf: &StoredWorkflow,
    nodes: &HashMap<String, NodeRow>,
    step: &Step,
    now: Millis,
    budget: &mut Budget,
) -> StoreResult<bool> {
    let outputs = parent_outputs(tx, &wf.definition, nodes, &step.due).await?;
    let mut events = Vec::new();
    let mut refused_any = false;
    for node in &step.due {
        let Some(job_id) = wf.node_jobs.get(node) else {
            continue;
        };
        let parents = outputs
            .get(node)
            .map(|o| serde_json::Value::Object(o.clone()).to_string());
        let bytes = parents.as_ref().map_or(0, |p| p.len() as u64);
        let refusal = budget
            .limits
            .admit_node(budget.started, budget.stored, bytes)
            .err();
        let exec_id = uuid::Uuid::now_v7().to_string();
        if !move_node(tx, run, node, NodeTransition::Start, Some(&exec_id), now).await? {
            continue;
        }
        budget.started += 1;
        let new = NewNodeExec {
            id: &exec_id,
            job_id,
            run,
            now,
        };
        match &refusal {
            None => {
                budget.stored += bytes;
                new.insert(tx, ExecStatus::Pending, parents, None).await?;
                events.push(EventRow::plain(&exec_id, 1, ExecStatus::Pending, now));
            }
            Some(why) => {
                let error = why.message();
                new.insert(tx, ExecStatus::Failed, None, Some(&error))
                    .await?;
                let failed = NodeTransition::Settle(NodeStatus::Failed);
                move_node(tx, run, node, failed, None, now).await?;
                events.push(EventRow {
                    error: Some(error),
                    ..EventRow::plain(&exec_id, 1, ExecStatus::Failed, now)
                });
                refused_any = true;
            }
        }
    }
    inserts::events(tx, &events).await?;
    Ok(refused_any)
}

/// Moves one node row by `t` if it is in one of `t`'s states (recording
/// its execution when given); whether it moved.
async fn move_node(
    tx: &mut Tx,
    run: &WorkflowRun,
    node: &str,
    t: NodeTransition,
    execution_id: Option<&str>,
    now: Millis,
) -> StoreResult<bool> {
    let mut f = Fields::new()
        .with("status", t.to_state().as_str())
        .with("updated_at", time(now));
    if let Some(id) = execution_id {
        f.set("execution_id", id).set("decided_at", time(now));
    }
    let moved = Sql::new("UPDATE workflow_run_nodes SET ")
        .set(&f)
        .push(" WHERE run_id = ")
        .bind(run.id.as_str())
        .push(" AND node_id = ")
        .bind(node)
        .push(" AND status IN ")
        .list(t.from_states().iter().map(|s| s.as_str()))
        .execute(&mut *tx)
        .await?;
    Ok(moved == 1)
}

/// A node's execution in a run, to insert.
struct NewNodeExec<'a> {
    id: &'a str,
    job_id: &'a str,
    run: &'a WorkflowRun,
    now: Millis,
}

impl NewNodeExec<'_> {
    /// Inserts it at the run's trigger time (or, should that be taken for
    /// the node's job by a manual trigger at that very millisecond, the
    /// next free one: the node row's move is what keeps one execution per
    /// node per run).
    async fn insert(
        &self,
        tx: &mut Tx,
        status: ExecStatus,
        parents: Option<String>,
        error: Option<&str>,
    ) -> StoreResult<()> {
        let now = self.now;
        let row = |at: Millis| {
            Fields::new()
                .with("id", self.id)
                .with("job_id", self.job_id)
                .with("tenant", self.run.tenant.as_str())
                .with("scheduled_at", time(at))
                .with("attempt", 1_i64)
                .with("status", status.as_str())
                .with("error", error)
                .with("not_before", time(now))
                .with("finished_at", time(status.is_terminal().then_some(now)))
                .with("created_at", time(now))
                .with("updated_at", time(now))
                .with("shard_index", 0_i64)
                .with("shard_count", 1_i64)
                .with("parent_outputs", json(parents.clone()))
        };
        let inserted = Sql::new("")
            .insert_ignore_into()
            .push("executions")
            .rows([&row(self.run.scheduled_at)])
            .on_conflict_ignore()
            .execute(&mut *tx)
            .await?;
        if inserted == 0 {
            let at = super::followups::free_slot(tx, self.job_id, self.run.scheduled_at).await?;
            Sql::new("INSERT INTO executions")
                .rows([&row(at)])
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }
}

/// Records the step's skipped nodes.
async fn skip(tx: &mut Tx, run: &WorkflowRun, step: &Step, now: Millis) -> StoreResult<()> {
    if step.skipped.is_empty() {
        return Ok(());
    }
    let skip = NodeTransition::Skip;
    Sql::new("UPDATE workflow_run_nodes SET ")
        .set(
            &Fields::new()
                .with("status", skip.to_state().as_str())
                .with("decided_at", time(now))
                .with("updated_at", time(now)),
        )
        .push(" WHERE run_id = ")
        .bind(run.id.as_str())
        .push(" AND node_id IN ")
        .list(step.skipped.iter().map(String::as_str))
        .push(" AND status IN ")
        .list(skip.from_states().iter().map(|s| s.as_str()))
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// For each node of `due`, its parents' outputs by parent node id (`null`
/// for a parent that ended without one, or never ran).
async fn parent_outputs(
    tx: &mut Tx,
    def: &Workflow,
    nodes: &HashMap<String, NodeRow>,
    due: &[String],
) -> StoreResult<HashMap<String, serde_json::Map<String, serde_json::Value>>> {
    let wanted: Vec<&str> = due
        .iter()
        .flat_map(|n| def.parents_of(n))
        .filter_map(|e| nodes.get(&e.from).and_then(|r| r.execution_id.as_deref()))
        .collect();
    let found = fetch_chunked(&mut *tx, &wanted, |chunk| {
        let mut s = Sql::new("SELECT id, output FROM executions WHERE id IN ");
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut by_exec = HashMap::new();
    for row in &found {
        let r = R::new(row, "executions");
        by_exec.insert(r.string("id")?, r.opt_json("output")?);
    }
    let mut out = HashMap::new();
    for node in due {
        let mut map = serde_json::Map::new();
        for e in def.parents_of(node) {
            let output = nodes
                .get(&e.from)
                .and_then(|r| r.execution_id.as_ref())
                .and_then(|id| by_exec.get(id).cloned().flatten())
                .unwrap_or(serde_json::Value::Null);
            map.insert(e.from.clone(), output);
        }
        if !map.is_empty() {
            out.insert(node.clone(), map);
        }
    }
    Ok(out)
}
