//! Moving runs on when node executions end, inside the transaction that
//! ends them (results and reaper verdicts, `crate::outcomes`): each ended
//! execution settles its node, and the run is advanced by
//! [`kairos_core::workflow::advance`]: the children that became due get
//! their executions (pending, due now, for the dispatcher's sweep), those
//! that never will are skipped, and a run whose nodes are all settled ends.
//!
//! The runs are locked (`FOR UPDATE`, in id order; SQLite's single writer
//! serializes anyway) before their node rows are read, under READ
//! COMMITTED: two dispatchers ending the last two parents of a fan-in node
//! take turns, and the second one sees the first one's node settled, so the
//! child is created exactly once (its node move is conditional too, and
//! the executions key forbids a second execution of a node in a run).

use super::runs::{lock_runs, node_rows, workflows_by_id};
use super::step::apply_step;
use crate::db::Tx;
use crate::rows::R;
use crate::sql::{Fields, Sql, fetch_chunked, time};
use kairos_core::execution::Execution;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{NodeStatus, NodeTransition, RunStatus, advance};
use std::collections::{HashMap, HashSet};

/// Settles the nodes of `ended` (executions of node jobs that reached a
/// terminal state in this transaction, already written) and advances their
/// runs. Executions that back no node (a node job triggered by hand) are
/// left alone. Returns the executions among `ended` whose settling ended
/// their run and queued its callback (so the caller can wake the relay).
pub(crate) async fn on_settled(
    tx: &mut Tx,
    ended: &[&Execution],
    now: Millis,
    limits: RunLimits,
) -> StoreResult<HashSet<String>> {
    let mut queued = HashSet::new();
    if ended.is_empty() {
        return Ok(queued);
    }
    let ids: Vec<&str> = {
        let set: HashSet<&str> = ended.iter().map(|e| e.id.as_str()).collect();
        set.into_iter().collect()
    };
    let found = fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new(
            "SELECT run_id, node_id, execution_id FROM workflow_run_nodes WHERE execution_id IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    if found.is_empty() {
        return Ok(queued);
    }
    let status_of: HashMap<&str, _> = ended.iter().map(|e| (e.id.as_str(), e.status)).collect();
    let mut settle = Vec::new();
    for row in &found {
        let r = R::new(row, "workflow_run_nodes");
        let exec = r.string("execution_id")?;
        if let Some(st) = status_of
            .get(exec.as_str())
            .and_then(|s| NodeStatus::of_execution(*s))
        {
            settle.push((r.string("run_id")?, r.string("node_id")?, st, exec));
        }
    }
    let run_ids: Vec<&str> = settle.iter().map(|(r, ..)| r.as_str()).collect();
    let runs: Vec<_> = lock_runs(tx, &run_ids)
        .await?
        .into_iter()
        .filter(|r| r.status == RunStatus::Running)
        .collect();
    if runs.is_empty() {
        return Ok(queued);
    }
    let running: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    for (run, node, st, _) in &settle {
        if !running.contains(run.as_str()) {
            continue;
        }
        let t = NodeTransition::Settle(*st);
        Sql::new("UPDATE workflow_run_nodes SET ")
            .set(
                &Fields::new()
                    .with("status", t.to_state().as_str())
                    .with("updated_at", time(now)),
            )
            .push(" WHERE run_id = ")
            .bind(run.as_str())
            .push(" AND node_id = ")
            .bind(node.as_str())
            .push(" AND status IN ")
            .list(t.from_states().iter().map(|s| s.as_str()))
            .execute(&mut *tx)
            .await?;
    }
    let wf_ids: Vec<&str> = {
        let set: HashSet<&str> = runs.iter().map(|r| r.workflow_id.as_str()).collect();
        set.into_iter().collect()
    };
    let workflows = workflows_by_id(tx, &wf_ids).await?;
    let live: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let nodes = node_rows(tx, &live).await?;
    let empty = HashMap::new();
    for run in &runs {
        let Some(current) = workflows.get(&run.workflow_id) else {
            continue;
        };
        // The graph the run started with, even if a PATCH replaced it since.
        let wf = &super::control::as_of_version(&mut *tx, current, run.definition_version).await?;
        let rows = nodes.get(&run.id).unwrap_or(&empty);
        let states: HashMap<String, NodeStatus> =
            rows.iter().map(|(id, r)| (id.clone(), r.status)).collect();
        let step = advance(&wf.definition, &states);
        if apply_step(tx, run, wf, rows, &step, now, limits).await? {
            queued.extend(
                settle
                    .iter()
                    .filter(|(r, ..)| *r == run.id)
                    .map(|(.., exec)| exec.clone()),
            );
        }
    }
    Ok(queued)
}
