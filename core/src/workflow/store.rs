//! The storage port of workflows: definitions, runs and the nodes of each
//! run. Advancing a run is not a call here: it happens inside
//! [`crate::store::Dispatch::results_apply`] and the reaper's verdicts, in
//! the transaction that ends a node's execution.

use super::{NodeStatus, RunStatus, Workflow};
use crate::execution::ExecStatus;
use crate::schedule::Schedule;
use crate::store::{Page, StoreResult};
use crate::time::Millis;
use async_trait::async_trait;
use std::collections::BTreeMap;

/// A workflow as the API accepted it, before it is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflow {
    /// Id chosen by the API (UUIDv7 text).
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Caller's name.
    pub name: String,
    /// The validated graph.
    pub definition: Workflow,
    /// Caller's idempotency key, unique per tenant.
    pub client_request_id: Option<String>,
    /// Fingerprint of the create request.
    pub request_hash: Option<String>,
    /// A run to start in the create's own transaction (its id), for a
    /// workflow created to run now.
    pub run_now: Option<String>,
    /// When it starts runs by itself (`None`: only when triggered).
    pub schedule: Option<Schedule>,
    /// Its first scheduled trigger.
    pub next_trigger_at: Option<Millis>,
    /// Creation time.
    pub created_at: Millis,
}

/// Whether a workflow can still be triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowStatus {
    /// Triggers create runs.
    Active,
    /// Deleted by its owner: no new runs; its running runs were cancelled.
    Deleted,
}

impl WorkflowStatus {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Active => "active",
            WorkflowStatus::Deleted => "deleted",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [WorkflowStatus::Active, WorkflowStatus::Deleted]
            .into_iter()
            .find(|st| st.as_str() == s)
    }
}

/// A stored workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredWorkflow {
    /// Id.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Caller's name.
    pub name: String,
    /// The graph.
    pub definition: Workflow,
    /// The internal job backing each node, by node id: a node's executions
    /// are that job's executions.
    pub node_jobs: BTreeMap<String, String>,
    /// Active or deleted.
    pub status: WorkflowStatus,
    /// When it starts runs by itself (`None`: only when triggered).
    pub schedule: Option<Schedule>,
    /// Its next scheduled trigger, `None` when none is left.
    pub next_trigger_at: Option<Millis>,
    /// Caller's idempotency key.
    pub client_request_id: Option<String>,
    /// Fingerprint of the create request.
    pub request_hash: Option<String>,
    /// Creation time.
    pub created_at: Millis,
    /// Last change.
    pub updated_at: Millis,
}

/// One run of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRun {
    /// Id.
    pub id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// Owner.
    pub tenant: String,
    /// State.
    pub status: RunStatus,
    /// Its trigger time (unique per workflow); also the `scheduledAt` of
    /// every node execution of the run.
    pub scheduled_at: Millis,
    /// When it was created.
    pub created_at: Millis,
    /// When it ended.
    pub finished_at: Option<Millis>,
}

/// One node of a run, with its execution as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct RunNode {
    /// Node id.
    pub node_id: String,
    /// The node's state.
    pub status: NodeStatus,
    /// Its execution, once it became due.
    pub execution_id: Option<String>,
    /// That execution's state.
    pub execution_status: Option<ExecStatus>,
    /// That execution's current attempt.
    pub attempt: Option<u32>,
    /// When it was decided (became due, was skipped or cancelled).
    pub decided_at: Option<Millis>,
    /// When its execution's current attempt started.
    pub started_at: Option<Millis>,
    /// When its execution ended.
    pub finished_at: Option<Millis>,
}

/// A run with its nodes, in the workflow's node order.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDetail {
    /// The run.
    pub run: WorkflowRun,
    /// Its nodes.
    pub nodes: Vec<RunNode>,
}

/// Outcome of an idempotent workflow create.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowCreated {
    /// Inserted and committed, with the run started by it, if asked.
    Created(StoredWorkflow, Option<WorkflowRun>),
    /// One with the same `(tenant, client_request_id)` existed; unchanged.
    Existing(StoredWorkflow),
}

/// Outcome of cancelling a run.
#[derive(Debug, Clone, PartialEq)]
pub enum RunControl {
    /// Cancelled; the run as it is now.
    Done(WorkflowRun),
    /// No such run of this tenant's workflow.
    NotFound,
    /// The run had already ended; the run as it is.
    Conflict(WorkflowRun),
}

/// Workflows: definitions, their runs and the nodes of each run.
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// Inserts the workflow and one internal job per node (never scanned:
    /// no trigger of its own), and, with `run_now`, a first run with its
    /// root nodes' executions, in one transaction; or returns the existing
    /// workflow with the same `(tenant, client_request_id)`.
    async fn workflow_create(&self, wf: NewWorkflow) -> StoreResult<WorkflowCreated>;
    /// One workflow of a tenant (deleted ones too).
    async fn workflow_get(&self, tenant: &str, id: &str) -> StoreResult<Option<StoredWorkflow>>;
    /// A tenant's active workflows, newest first.
    async fn workflows_list(
        &self,
        tenant: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<StoredWorkflow>>;
    /// Marks the workflow deleted and cancels its running runs (as
    /// [`Self::workflow_run_cancel`]) and its node jobs, in one
    /// transaction. `false` if there is no such active workflow.
    async fn workflow_delete(&self, tenant: &str, id: &str, now: Millis) -> StoreResult<bool>;
    /// Creates a run at the first free trigger time from `now` and the
    /// executions of its root nodes (pending, due now), in one transaction.
    /// `None` if there is no such active workflow.
    async fn workflow_trigger(
        &self,
        tenant: &str,
        id: &str,
        run_id: &str,
        now: Millis,
    ) -> StoreResult<Option<WorkflowRun>>;
    /// A workflow's runs, newest first.
    async fn workflow_runs_list(
        &self,
        tenant: &str,
        workflow_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<WorkflowRun>>;
    /// One run with its nodes.
    async fn workflow_run_get(
        &self,
        tenant: &str,
        workflow_id: &str,
        run_id: &str,
    ) -> StoreResult<Option<RunDetail>>;
    /// `running → cancelled` in one transaction: waiting nodes are
    /// cancelled, pending node executions cancelled, and a stop is requested
    /// for dispatched and running ones (their end changes the run no more).
    async fn workflow_run_cancel(
        &self,
        tenant: &str,
        workflow_id: &str,
        run_id: &str,
        now: Millis,
    ) -> StoreResult<RunControl>;
}

/// The leading dispatcher's side of scheduled workflows.
#[async_trait]
pub trait WorkflowScheduler: Send + Sync {
    /// Starts a run (with its roots' executions, pending and due now) for
    /// each active workflow whose next trigger is due by `now`, at most
    /// `limit`, and moves each to its following trigger (a trigger missed
    /// while no leader ran fires once, late; a one-shot has none after),
    /// one transaction per call. The run's trigger time is the schedule's,
    /// unique per workflow, so a trigger starts at most one run even if two
    /// leaders overlap. Returns the runs started.
    async fn workflows_fire_due(&self, now: Millis, limit: u32) -> StoreResult<Vec<WorkflowRun>>;
}
