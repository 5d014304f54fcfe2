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
    /// Where a signed run-end event is POSTed for each run that ends.
    pub callback_url: Option<String>,
    /// Creation time.
    pub created_at: Millis,
}

/// Whether a workflow starts runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowStatus {
    /// Its triggers (scheduled and manual) create runs.
    Active,
    /// Paused by its owner: no scheduled run starts and a manual trigger is
    /// refused; the runs already started go on.
    Paused,
    /// Deleted by its owner: no new runs; its running runs were cancelled.
    Deleted,
}

impl WorkflowStatus {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Active => "active",
            WorkflowStatus::Paused => "paused",
            WorkflowStatus::Deleted => "deleted",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            WorkflowStatus::Active,
            WorkflowStatus::Paused,
            WorkflowStatus::Deleted,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

/// A caller's move of a workflow; the legal ones, in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowTransition {
    /// `active → paused`.
    Pause,
    /// `paused → active`.
    Resume,
    /// `active | paused → deleted`.
    Delete,
    /// A change of its definition, schedule, name or callback (the state
    /// stays): allowed while not deleted.
    Edit,
}

impl WorkflowTransition {
    /// The states this move may start from.
    pub fn from_states(self) -> &'static [WorkflowStatus] {
        match self {
            WorkflowTransition::Pause => &[WorkflowStatus::Active],
            WorkflowTransition::Resume => &[WorkflowStatus::Paused],
            WorkflowTransition::Delete | WorkflowTransition::Edit => {
                &[WorkflowStatus::Active, WorkflowStatus::Paused]
            }
        }
    }

    /// The state after the move from `from`.
    pub fn to_state(self, from: WorkflowStatus) -> WorkflowStatus {
        match self {
            WorkflowTransition::Pause => WorkflowStatus::Paused,
            WorkflowTransition::Resume => WorkflowStatus::Active,
            WorkflowTransition::Delete => WorkflowStatus::Deleted,
            WorkflowTransition::Edit => from,
        }
    }

    /// Whether this move may be applied to a workflow in `from`.
    pub fn allowed_from(self, from: WorkflowStatus) -> bool {
        self.from_states().contains(&from)
    }
}

/// Whether a manual trigger may start a run of a workflow in `status`.
pub fn triggerable(status: WorkflowStatus) -> bool {
    status == WorkflowStatus::Active
}

/// The next trigger of a workflow resumed at `now` whose stored next
/// trigger is `stored`: a trigger missed while paused fires once, late
/// (the `fireOnce` misfire policy), unless the schedule's misfire policy
/// is `skip`, which moves on to the first trigger from `now`.
pub fn resumed_next_trigger(
    schedule: Option<&Schedule>,
    stored: Option<Millis>,
    now: Millis,
) -> Option<Millis> {
    let at = stored?;
    match schedule {
        Some(s) if crate::trigger::misfire_skips(s, at, now) => s.next_trigger(at, now),
        _ => Some(at),
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
    /// Active, paused or deleted.
    pub status: WorkflowStatus,
    /// Where a signed run-end event is POSTed for each run that ends.
    pub callback_url: Option<String>,
    /// Moves with each caller's change (edit, pause, resume): `PATCH`
    /// checks it, as for jobs.
    pub version: i64,
    /// Moves with each change of the graph: a run follows the definition
    /// version it started with.
    pub definition_version: i64,
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
    /// The workflow's definition version it follows (the one current when
    /// it started: a later `PATCH` does not change a started run).
    pub definition_version: i64,
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
    /// The graph the run follows (its definition version's).
    pub definition: Workflow,
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

/// Outcome of a caller's pause or resume of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowControl {
    /// Applied; the workflow as it is now.
    Done(StoredWorkflow),
    /// No such workflow of this tenant.
    NotFound,
    /// Its state does not allow the move; the workflow as it is.
    Conflict(StoredWorkflow),
}

/// Outcome of a manual trigger.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowTriggered {
    /// A run started.
    Started(WorkflowRun),
    /// No such workflow of this tenant (or deleted).
    NotFound,
    /// The workflow is paused.
    Paused,
}

/// A checked change of a workflow (`PATCH`): each `Some` replaces the field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkflowUpdate {
    /// New name.
    pub name: Option<String>,
    /// New graph (validated): runs started from now on follow it.
    pub definition: Option<Workflow>,
    /// New schedule (`Some(None)`: none) with its next trigger (`None`
    /// when its window has none left).
    pub schedule: Option<Option<(Schedule, Option<Millis>)>>,
    /// New callback URL (`Some(None)` clears it).
    pub callback_url: Option<Option<String>>,
}

/// Outcome of a workflow `PATCH`.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowUpdated {
    /// Changed; the workflow as it is now.
    Done(StoredWorkflow),
    /// No such workflow of this tenant.
    NotFound,
    /// A caller changed it since the version sent; as it is.
    VersionConflict(StoredWorkflow),
    /// Deleted: it can no longer change; as it is.
    Conflict(StoredWorkflow),
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
    /// executions of its root nodes (pending, due now), in one transaction;
    /// refused for a paused workflow.
    async fn workflow_trigger(
        &self,
        tenant: &str,
        id: &str,
        run_id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowTriggered>;
    /// `active → paused`: no scheduled run starts until it is resumed (its
    /// started runs go on). Moves `version`.
    async fn workflow_pause(
        &self,
        tenant: &str,
        id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowControl>;
    /// `paused → active`, its next trigger per [`resumed_next_trigger`].
    /// Moves `version`.
    async fn workflow_resume(
        &self,
        tenant: &str,
        id: &str,
        now: Millis,
    ) -> StoreResult<WorkflowControl>;
    /// Applies `update` if the workflow is at `version` and not deleted, in
    /// one transaction. A new graph moves `definition_version` and keeps
    /// the previous one for the runs started with it (a node whose template
    /// changed gets a new internal job, so those runs' executions keep
    /// theirs). Moves `version`.
    async fn workflow_update(
        &self,
        tenant: &str,
        id: &str,
        version: i64,
        update: &WorkflowUpdate,
        now: Millis,
    ) -> StoreResult<WorkflowUpdated>;
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
    /// each active (not paused) workflow whose next trigger is due by `now`, at most
    /// `limit`, and moves each to its following trigger (a trigger missed
    /// while no leader ran fires once, late; a one-shot has none after),
    /// one transaction per call. The run's trigger time is the schedule's,
    /// unique per workflow, so a trigger starts at most one run even if two
    /// leaders overlap. Returns the runs started.
    async fn workflows_fire_due(&self, now: Millis, limit: u32) -> StoreResult<Vec<WorkflowRun>>;
}
