//! [`WorkflowStore`]: workflows, their runs and the nodes of each run
//! (issue 34). Each node is backed by an internal job row (`jobs.workflow_id`
//! set, no trigger of its own, left out of job listings), so a node's
//! execution is an ordinary execution of that job: the dispatcher's sweep
//! publishes it, and retries, timeouts, logs, stops and recovery are the
//! ones every execution has. One job per node of the definition (not per
//! run) keeps the jobs table small; the executions of one run all carry the
//! run's trigger time as `scheduled_at`, and runs are unique per workflow
//! and trigger time, so the executions key `(job_id, scheduled_at,
//! shard_index)` allows one execution per node per run, beside the
//! `(run_id, node_id)` key of the run's node rows.
//!
//! `control` pauses, resumes and changes (`PATCH`) a workflow; a new graph
//! keeps the one it replaces (`workflow_definitions`) for the runs that
//! follow it: a run reads the definition version it started with.
//! `followups` holds child jobs (a job's follow-ups), and `chains` fires
//! them in the transaction that ends an execution, each job once per chain
//! and within the chain's budget. `schedule` starts the runs of scheduled workflows for the leading
//! dispatcher. `runs` creates runs and applies a [`kairos_core::workflow::Step`];
//! `advance` is called by the transaction that ends executions
//! (`crate::outcomes`) and moves their runs on in that same transaction.

mod advance;
mod chains;
mod control;
mod followups;
mod runs;
mod schedule;
mod step;

pub(crate) use advance::on_settled;
pub(crate) use chains::fire as fire_followups;

use crate::db::{Row, Tx};
use crate::error::{corrupt, is_unique_violation};
use crate::keyset;
use crate::rows::R;
use crate::sql::{Fields, Sql, json, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::job::{NewJob, RetryPolicy};
use kairos_core::schedule::Schedule;
use kairos_core::shard::ExecutionMode;
use kairos_core::store::{Page, StoreResult};
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{
    NewWorkflow, NodeSpec, RunControl, RunDetail, StoredWorkflow, Workflow, WorkflowControl,
    WorkflowCreated, WorkflowRun, WorkflowStatus, WorkflowStore, WorkflowTransition,
    WorkflowTriggered, WorkflowUpdate, WorkflowUpdated, triggerable,
};
use std::collections::BTreeMap;

const WF_COLS: [&str; 15] = [
    "id",
    "tenant",
    "name",
    "definition",
    "node_jobs",
    "status",
    "schedule",
    "next_trigger_at",
    "client_request_id",
    "request_hash",
    "callback_url",
    "version",
    "definition_version",
    "created_at",
    "updated_at",
];

fn workflow_row(row: &Row) -> StoreResult<StoredWorkflow> {
    let r = R::new(row, "workflows");
    let definition: Workflow =
        serde_json::from_value(r.json("definition")?).map_err(|e| corrupt("workflows", e))?;
    let node_jobs: BTreeMap<String, String> =
        serde_json::from_value(r.json("node_jobs")?).map_err(|e| corrupt("workflows", e))?;
    Ok(StoredWorkflow {
        id: r.string("id")?,
        tenant: r.string("tenant")?,
        name: r.string("name")?,
        definition,
        node_jobs,
        status: r.parsed("status", WorkflowStatus::parse)?,
        callback_url: r.opt_string("callback_url")?,
        version: r.i64("version")?,
        definition_version: r.i64("definition_version")?,
        schedule: r
            .opt_json("schedule")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| corrupt("workflows", e))?,
        next_trigger_at: r.opt_time("next_trigger_at")?,
        client_request_id: r.opt_string("client_request_id")?,
        request_hash: r.opt_string("request_hash")?,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
    })
}

fn workflow_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("w", &WF_COLS).push(" FROM workflows w");
    s
}

/// One workflow of a tenant, row-locked when `lock` (and the database has
/// row locks).
async fn get_workflow(
    on: impl Into<crate::db::On<'_>>,
    tenant: &str,
    id: &str,
    lock: bool,
) -> StoreResult<Option<StoredWorkflow>> {
    let mut s = workflow_select();
    s.push(" WHERE w.tenant = ")
        .bind(tenant)
        .push(" AND w.id = ")
        .bind(id);
    if lock {
        s.for_update();
    }
    s.fetch_optional(on)
        .await?
        .as_ref()
        .map(workflow_row)
        .transpose()
}

async fn by_request(
    on: impl Into<crate::db::On<'_>>,
    tenant: &str,
    key: &str,
) -> StoreResult<Option<StoredWorkflow>> {
    let mut s = workflow_select();
    s.push(" WHERE w.tenant = ")
        .bind(tenant)
        .push(" AND w.client_request_id = ")
        .bind(key);
    s.fetch_optional(on)
        .await?
        .as_ref()
        .map(workflow_row)
        .transpose()
}

/// The internal job of a node: a one-shot template that never fires by
/// itself (`next_trigger_at` NULL), whose executions the runs create.
fn node_job(tenant: &str, workflow_id: &str, node: &NodeSpec, job_id: &str, now: Millis) -> Fields {
    let job = NewJob {
        id: job_id.to_string(),
        tenant: tenant.to_string(),
        name: format!("workflow:{workflow_id}/{}", node.id),
        handler: node.handler.clone(),
        params: node.params.clone(),
        sensitive_params: Vec::new(),
        schedule: Schedule::Once { at: now },
        next_trigger_at: now,
        callback_url: None,
        client_request_id: None,
        request_hash: None,
        retry: RetryPolicy {
            max_attempts: node.max_attempts.max(1),
            backoff_ms: node.retry_backoff_ms,
        },
        timeout_ms: node.timeout_ms,
        worker_group: node.worker_group.clone(),
        priority: Default::default(),
        max_concurrency: None,
        trace: None,
        execution_mode: ExecutionMode::Single,
        created_at: now,
        created_by: None,
    };
    crate::create::job_fields(&job)
}

/// Inserts the internal jobs of `nodes` (node, job id), marked as the
/// workflow's and without a trigger of their own: the scan never finds
/// them, job listings leave them out, and their ends move runs.
async fn insert_node_jobs(
    tx: &mut Tx,
    tenant: &str,
    workflow_id: &str,
    nodes: &[(&NodeSpec, &str)],
    now: Millis,
) -> StoreResult<()> {
    let jobs: Vec<Fields> = nodes
        .iter()
        .map(|(n, id)| node_job(tenant, workflow_id, n, id, now))
        .collect();
    for chunk in jobs.chunks(64) {
        Sql::new("INSERT INTO jobs")
            .rows(chunk)
            .execute(&mut *tx)
            .await?;
    }
    let ids: Vec<&str> = nodes.iter().map(|(_, id)| *id).collect();
    for chunk in ids.chunks(crate::sql::CHUNK) {
        Sql::new("UPDATE jobs SET ")
            .set(
                &Fields::new()
                    .with("next_trigger_at", time(None::<Millis>))
                    .with("workflow_id", workflow_id),
            )
            .push(" WHERE id IN ")
            .list(chunk.iter().copied())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

fn to_json<T: ?Sized + serde::Serialize>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| corrupt("workflows", e))
}

async fn create(mut tx: Tx, wf: &NewWorkflow, limits: RunLimits) -> StoreResult<WorkflowCreated> {
    if let Some(key) = &wf.client_request_id
        && let Some(existing) = by_request(&mut tx, &wf.tenant, key).await?
    {
        return Ok(WorkflowCreated::Existing(existing));
    }
    let node_jobs: BTreeMap<String, String> = wf
        .definition
        .nodes
        .iter()
        .map(|n| (n.id.clone(), uuid::Uuid::now_v7().to_string()))
        .collect();
    let pairs: Vec<(&NodeSpec, &str)> = wf
        .definition
        .nodes
        .iter()
        .map(|n| (n, node_jobs[&n.id].as_str()))
        .collect();
    insert_node_jobs(&mut tx, &wf.tenant, &wf.id, &pairs, wf.created_at).await?;
    let stored = StoredWorkflow {
        id: wf.id.clone(),
        tenant: wf.tenant.clone(),
        name: wf.name.clone(),
        definition: wf.definition.clone(),
        node_jobs,
        status: WorkflowStatus::Active,
        callback_url: wf.callback_url.clone(),
        version: 1,
        definition_version: 1,
        schedule: wf.schedule.clone(),
        next_trigger_at: wf.next_trigger_at,
        client_request_id: wf.client_request_id.clone(),
        request_hash: wf.request_hash.clone(),
        created_at: wf.created_at,
        updated_at: wf.created_at,
    };
    let row = Fields::new()
        .with("id", stored.id.as_str())
        .with("tenant", stored.tenant.as_str())
        .with("name", stored.name.as_str())
        .with("definition", json(to_json(&stored.definition)?))
        .with("node_jobs", json(to_json(&stored.node_jobs)?))
        .with("status", stored.status.as_str())
        .with(
            "schedule",
            json(stored.schedule.as_ref().map(to_json).transpose()?),
        )
        .with("callback_url", stored.callback_url.as_deref())
        .with("version", stored.version)
        .with("definition_version", stored.definition_version)
        .with("next_trigger_at", time(stored.next_trigger_at))
        .with("client_request_id", stored.client_request_id.as_deref())
        .with("request_hash", stored.request_hash.as_deref())
        .with("created_at", time(stored.created_at))
        .with("updated_at", time(stored.updated_at));
    Sql::new("INSERT INTO workflows")
        .rows([&row])
        .execute(&mut tx)
        .await?;
    let run = match &wf.run_now {
        Some(run_id) => Some(
            runs::start(
                &mut tx,
                &stored,
                run_id,
                wf.created_at,
                wf.created_at,
                limits,
            )
            .await?,
        ),
        None => None,
    };
    tx.commit().await?;
    Ok(WorkflowCreated::Created(stored, run))
}

/// Marks the workflow deleted, cancels its running runs and the node jobs
/// of all its definition versions.
async fn delete(mut tx: Tx, tenant: &str, id: &str, now: Millis) -> StoreResult<bool> {
    let Some(wf) = get_workflow(&mut tx, tenant, id, true).await? else {
        return tx.unchanged(false).await;
    };
    let t = WorkflowTransition::Delete;
    if !t.allowed_from(wf.status) {
        return tx.unchanged(false).await;
    }
    Sql::new("UPDATE workflows SET ")
        .set(
            &Fields::new()
                .with("status", t.to_state(wf.status).as_str())
                .with("updated_at", time(now)),
        )
        .push(" WHERE id = ")
        .bind(id)
        .execute(&mut tx)
        .await?;
    for run in runs::running_of(&mut tx, id).await? {
        runs::cancel(&mut tx, &run, Some(&wf), now).await?;
    }
    let mut all_jobs: std::collections::BTreeSet<String> = wf.node_jobs.values().cloned().collect();
    all_jobs.extend(control::superseded_node_jobs(&mut tx, id).await?);
    let job_ids: Vec<&str> = all_jobs.iter().map(String::as_str).collect();
    let cancel = kairos_core::job::JobTransition::Cancel;
    for chunk in job_ids.chunks(crate::sql::CHUNK) {
        Sql::new("UPDATE jobs SET ")
            .set(
                &Fields::new()
                    .with("status", cancel.to_state().as_str())
                    .with("updated_at", time(now)),
            )
            .push(", version = version + 1, revision = revision + 1 WHERE id IN ")
            .list(chunk.iter().copied())
            .push(" AND status IN ")
            .list(cancel.from_states().iter().map(|s| s.as_str()))
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await?;
    Ok(true)
}

async fn trigger(
    mut tx: Tx,
    tenant: &str,
    id: &str,
    run_id: &str,
    now: Millis,
    limits: RunLimits,
) -> StoreResult<WorkflowTriggered> {
    // The lock serializes the triggers of one workflow, so two never pick
    // the same free trigger time.
    let Some(wf) = get_workflow(&mut tx, tenant, id, true).await? else {
        return tx.unchanged(WorkflowTriggered::NotFound).await;
    };
    match wf.status {
        WorkflowStatus::Deleted => return tx.unchanged(WorkflowTriggered::NotFound).await,
        st if !triggerable(st) => return tx.unchanged(WorkflowTriggered::Paused).await,
        _ => {}
    }
    let run = runs::start(&mut tx, &wf, run_id, now, now, limits).await?;
    tx.commit().await?;
    Ok(WorkflowTriggered::Started(run))
}

#[async_trait]
impl WorkflowStore for SqlStore {
    async fn workflow_create(&self, wf: NewWorkflow) -> StoreResult<WorkflowCreated> {
        match self
            .transaction(|tx| create(tx, &wf, self.run_limits()))
            .await
        {
            // A concurrent create with the same key won the unique key.
            Err(e) if is_unique_violation(&e) => match &wf.client_request_id {
                Some(key) => match by_request(self.write(), &wf.tenant, key).await? {
                    Some(existing) => Ok(WorkflowCreated::Existing(existing)),
                    None => Err(e),
                },
                None => Err(e),
            },
            other => other,
        }
    }

    async fn workflow_get(&self, tenant: &str, id: &str) -> StoreResult<Option<StoredWorkflow>> {
        get_workflow(self.read(), tenant, id, false).await
    }

    async fn workflows_list(
        &self,
        tenant: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<StoredWorkflow>> {
        let mut s = workflow_select();
        s.push(" WHERE w.tenant = ")
            .bind(tenant)
            .push(" AND w.status <> ")
            .bind(WorkflowStatus::Deleted.as_str());
        keyset::fetch(
            self.read(),
            &s,
            cursor,
            limit,
            ("w.created_at", "w.id"),
            workflow_row,
            |w| (w.created_at, w.id.as_str()),
        )
        .await
    }

    async fn workflow_delete(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<bool> {
        self.transaction(|tx| delete(tx, tenant, id, now)).await
    }

    async fn workflow_trigger(
        &self,
        tenant: &str,
        id: &str,
        run_id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowTriggered> {
        self.transaction(|tx| trigger(tx, tenant, id, run_id, now, self.run_limits()))
            .await
    }

    async fn workflow_pause(
        &self,
        tenant: &str,
        id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowControl> {
        self.transaction(|tx| control::control(tx, tenant, id, WorkflowTransition::Pause, now))
            .await
    }

    async fn workflow_resume(
        &self,
        tenant: &str,
        id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowControl> {
        self.transaction(|tx| control::control(tx, tenant, id, WorkflowTransition::Resume, now))
            .await
    }

    async fn workflow_update(
        &self,
        tenant: &str,
        id: &str,
        version: i64,
        update: &WorkflowUpdate,
        now: Millis,
    ) -> StoreResult<WorkflowUpdated> {
        self.transaction(|tx| control::update(tx, tenant, id, version, update, now))
            .await
    }

    async fn workflow_runs_list(
        &self,
        tenant: &str,
        workflow_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<WorkflowRun>> {
        runs::list(self.read(), tenant, workflow_id, limit, cursor).await
    }

    async fn workflow_run_get(
        &self,
        tenant: &str,
        workflow_id: &str,
        run_id: &str,
    ) -> StoreResult<Option<RunDetail>> {
        runs::detail(self.read(), tenant, workflow_id, run_id).await
    }

    async fn workflow_run_cancel(
        &self,
        tenant: &str,
        workflow_id: &str,
        run_id: &str,
        now: Millis,
    ) -> StoreResult<RunControl> {
        self.transaction(|tx| runs::cancel_requested(tx, tenant, workflow_id, run_id, now))
            .await
    }
}
