//! A caller's control of a workflow: pause, resume and `PATCH`, each one
//! transaction on the locked workflow row. A new graph moves
//! `definition_version` and writes the graph it replaces to
//! `workflow_definitions`, where the runs that started with it read it
//! (`runs::followed`): a run keeps the definition it started with. A node
//! whose template (handler, params, limits, group) changed gets a new
//! internal job, since a node's execution reads those from its job; an
//! unchanged node keeps its job.

use super::{get_workflow, insert_node_jobs, to_json};
use crate::db::Tx;
use crate::rows::R;
use crate::sql::{Fields, Sql, json, time};
use kairos_core::schedule::Rule;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::{
    NodeSpec, StoredWorkflow, WorkflowControl, WorkflowTransition, WorkflowUpdate, WorkflowUpdated,
    resumed_next_trigger,
};
use std::collections::BTreeMap;

/// Pause or resume, per `t`.
pub(super) async fn control(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    t: WorkflowTransition,
    now: Millis,
) -> StoreResult<WorkflowControl> {
    let Some(wf) = get_workflow(&mut tx, tenant, id, true).await? else {
        return tx.unchanged(WorkflowControl::NotFound).await;
    };
    if !t.allowed_from(wf.status) {
        return tx.unchanged(WorkflowControl::Conflict(wf)).await;
    }
    // A resume fires a trigger missed while paused once (or skips it, per
    // the schedule's misfire policy); a pause keeps the next trigger, so
    // the resume knows what was missed.
    let next = match t {
        WorkflowTransition::Resume => {
            resumed_next_trigger(wf.schedule.as_ref(), wf.next_trigger_at, now)
        }
        _ => wf.next_trigger_at,
    };
    let status = t.to_state(wf.status);
    Sql::new("UPDATE workflows SET ")
        .set(
            &Fields::new()
                .with("status", status.as_str())
                .with("next_trigger_at", time(next))
                .with("updated_at", time(now)),
        )
        .push(", version = version + 1 WHERE id = ")
        .bind(id)
        .execute(&mut tx)
        .await?;
    tx.commit().await?;
    Ok(WorkflowControl::Done(StoredWorkflow {
        status,
        next_trigger_at: next,
        version: wf.version + 1,
        updated_at: now,
        ..wf
    }))
}

/// `PATCH`: applies `update` at `version`.
pub(super) async fn update(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    version: i64,
    update: &WorkflowUpdate,
    now: Millis,
) -> StoreResult<WorkflowUpdated> {
    let Some(wf) = get_workflow(&mut tx, tenant, id, true).await? else {
        return tx.unchanged(WorkflowUpdated::NotFound).await;
    };
    if wf.version != version {
        return tx.unchanged(WorkflowUpdated::VersionConflict(wf)).await;
    }
    if !WorkflowTransition::Edit.allowed_from(wf.status) {
        return tx.unchanged(WorkflowUpdated::Conflict(wf)).await;
    }
    let mut new = StoredWorkflow {
        version: wf.version + 1,
        updated_at: now,
        ..wf.clone()
    };
    let mut set = Fields::new();
    if let Some(name) = &update.name {
        new.name = name.clone();
        set.set("name", name.as_str());
    }
    if let Some(url) = &update.callback_url {
        new.callback_url = url.clone();
        set.set("callback_url", url.as_deref());
    }
    if let Some(schedule) = &update.schedule {
        new.schedule = schedule.as_ref().map(|(s, _)| s.clone());
        new.next_trigger_at = schedule.as_ref().and_then(|(_, next)| *next);
        // A fixed delay's next trigger waits for the running run's end,
        // which writes it (as a job's `PATCH` waits for its live execution).
        let delay = new
            .schedule
            .as_ref()
            .and_then(|s| s.recurrence())
            .is_some_and(|r| matches!(r.rule, Rule::Delay { .. }));
        if delay
            && new.next_trigger_at.is_some()
            && !super::runs::running_of(&mut tx, &wf.id).await?.is_empty()
        {
            new.next_trigger_at = None;
        }
        set.set(
            "schedule",
            json(new.schedule.as_ref().map(to_json).transpose()?),
        );
        set.set(
            "cron_dialect",
            crate::sched_cols::cron_dialect_of(new.schedule.as_ref()),
        );
        set.set("next_trigger_at", time(new.next_trigger_at));
    }
    if let Some(def) = update.definition.as_ref().filter(|d| **d != wf.definition) {
        keep_superseded(&mut tx, &wf, now).await?;
        let node_jobs = node_jobs_for(&wf, &def.nodes);
        let fresh: Vec<(&NodeSpec, &str)> = def
            .nodes
            .iter()
            .filter(|n| wf.node_jobs.get(&n.id) != node_jobs.get(&n.id))
            .map(|n| (n, node_jobs[&n.id].as_str()))
            .collect();
        insert_node_jobs(&mut tx, &wf.tenant, &wf.id, &fresh, now).await?;
        new.definition = def.clone();
        new.node_jobs = node_jobs;
        new.definition_version = wf.definition_version + 1;
        set.set("definition", json(to_json(&new.definition)?));
        set.set("node_jobs", json(to_json(&new.node_jobs)?));
        set.set("definition_version", new.definition_version);
    }
    set.set("updated_at", time(now));
    Sql::new("UPDATE workflows SET ")
        .set(&set)
        .push(", version = version + 1 WHERE id = ")
        .bind(id)
        .execute(&mut tx)
        .await?;
    tx.commit().await?;
    Ok(WorkflowUpdated::Done(new))
}

/// The job of each node of a new graph: the current one when the node's
/// template is unchanged, a new one otherwise.
fn node_jobs_for(wf: &StoredWorkflow, nodes: &[NodeSpec]) -> BTreeMap<String, String> {
    nodes
        .iter()
        .map(|n| {
            let same = wf.definition.nodes.iter().any(|old| old == n);
            let job = match wf.node_jobs.get(&n.id) {
                Some(job) if same => job.clone(),
                _ => uuid::Uuid::now_v7().to_string(),
            };
            (n.id.clone(), job)
        })
        .collect()
}

/// Writes the workflow's current graph to `workflow_definitions`, for the
/// runs that started with it.
async fn keep_superseded(tx: &mut Tx, wf: &StoredWorkflow, now: Millis) -> StoreResult<()> {
    let row = Fields::new()
        .with("workflow_id", wf.id.as_str())
        .with("version", wf.definition_version)
        .with("definition", json(to_json(&wf.definition)?))
        .with("node_jobs", json(to_json(&wf.node_jobs)?))
        .with("created_at", time(now));
    Sql::new("INSERT INTO workflow_definitions")
        .rows([&row])
        .execute(tx)
        .await?;
    Ok(())
}

/// `wf` as the runs of definition `version` see it: its current row for the
/// current version, else with the graph and node jobs that version had.
pub(super) async fn as_of_version(
    on: impl Into<crate::db::On<'_>>,
    wf: &StoredWorkflow,
    version: i64,
) -> StoreResult<StoredWorkflow> {
    if version == wf.definition_version {
        return Ok(wf.clone());
    }
    let row =
        Sql::new("SELECT definition, node_jobs FROM workflow_definitions WHERE workflow_id = ")
            .bind(wf.id.as_str())
            .push(" AND version = ")
            .bind(version)
            .fetch_optional(on)
            .await?;
    // Runs older than migration 0019 carry version 1, the only one there
    // was: a workflow without a stored older version is its current one.
    let Some(row) = row else {
        return Ok(wf.clone());
    };
    let r = R::new(&row, "workflow_definitions");
    let corrupt = |e| crate::error::corrupt("workflow_definitions", e);
    Ok(StoredWorkflow {
        definition: serde_json::from_value(r.json("definition")?).map_err(corrupt)?,
        node_jobs: serde_json::from_value(r.json("node_jobs")?).map_err(corrupt)?,
        ..wf.clone()
    })
}

/// The node jobs of the workflow's superseded graphs.
pub(super) async fn superseded_node_jobs(tx: &mut Tx, id: &str) -> StoreResult<Vec<String>> {
    let found = Sql::new("SELECT node_jobs FROM workflow_definitions WHERE workflow_id = ")
        .bind(id)
        .fetch_all(tx)
        .await?;
    let mut out = Vec::new();
    for row in &found {
        let r = R::new(row, "workflow_definitions");
        let jobs: BTreeMap<String, String> = serde_json::from_value(r.json("node_jobs")?)
            .map_err(|e| crate::error::corrupt("workflow_definitions", e))?;
        out.extend(jobs.into_values());
    }
    Ok(out)
}
