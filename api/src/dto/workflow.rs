//! Bodies of the workflow routes (`/openapi/workflows…`): the create
//! request, a workflow, its runs and a run's nodes.

use kairos_core::execution::ExecStatus;
use kairos_core::schedule::Rule;
use kairos_core::store::Page;
use kairos_core::time::to_rfc3339;
use kairos_core::workflow::{
    EdgeCondition, NodeStatus, RunDetail, RunNode, StoredWorkflow, WorkflowRun,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /openapi/workflows`. Unknown fields are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateWorkflowRequest {
    /// The caller's name for the workflow (1–255 characters).
    #[schema(example = "nightly-export")]
    pub name: String,
    /// The nodes: each a job template run once per run.
    pub nodes: Vec<WorkflowNode>,
    /// Parent → child dependencies (default: none, every node is a root).
    #[serde(default)]
    pub edges: Vec<WorkflowEdge>,
    /// Start a run at once, in the create's transaction (default: `true`
    /// without a schedule, `false` with one); `false` and no schedule: runs
    /// start only through `POST …/trigger`.
    pub run_now: Option<bool>,
    /// Cron expression (five fields, or six with seconds first): a run per
    /// trigger. At most one of `cronExpr`, `everyMs`, `delayMs` and `triggerAt`.
    #[schema(example = "0 0 2 * * *")]
    pub cron_expr: Option<String>,
    /// IANA time zone of the cron expression (default `UTC`).
    pub timezone: Option<String>,
    /// Fixed rate in ms (at least 100): a run every `everyMs` from creation.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub every_ms: Option<i64>,
    /// Fixed delay in ms (at least 100): the next run starts `delayMs`
    /// after the previous one ended (the first at `startAt`, or now).
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub delay_ms: Option<i64>,
    /// RFC 3339 time of one scheduled run.
    #[schema(format = DateTime)]
    pub trigger_at: Option<String>,
    /// RFC 3339 time before which a recurring workflow does not fire.
    #[schema(format = DateTime)]
    pub start_at: Option<String>,
    /// RFC 3339 time after which a recurring workflow does not fire (its
    /// next trigger is then `null`).
    #[schema(format = DateTime)]
    pub end_at: Option<String>,
    /// Recurring workflows: what to do with triggers missed (more than 5 s
    /// late) while no dispatcher ran.
    #[schema(schema_with = super::misfire_schema)]
    pub misfire_policy: Option<String>,
    /// Recurring workflows: what to do with a trigger while a run started
    /// earlier is still running.
    #[schema(schema_with = super::overlap_schema)]
    pub overlap_policy: Option<String>,
    /// Idempotency key (at most 128 characters): a repeated create with the
    /// same key and body returns the existing workflow (200).
    pub client_request_id: Option<String>,
    /// Where a signed run-end event is POSTed when each run ends (http or
    /// https, at most 2048 characters).
    #[schema(example = "https://example.com/hooks/kairos")]
    pub callback_url: Option<String>,
}

/// Body of `PATCH /openapi/workflows/{id}`: `version` plus the fields to
/// change; an absent field keeps its value. Unknown fields are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchWorkflowRequest {
    /// The `version` of the workflow as the caller read it; 409
    /// `version_conflict` if a caller changed it since (edit, pause,
    /// resume; its runs do not move it).
    pub version: i64,
    /// New name (1–255 characters).
    pub name: Option<String>,
    /// New nodes (checked as at create, with the edges: the new ones, or
    /// the current ones if absent). Runs already started keep the graph
    /// they started with.
    pub nodes: Option<Vec<WorkflowNode>>,
    /// New edges (with the nodes: the new ones, or the current ones).
    pub edges: Option<Vec<WorkflowEdge>>,
    /// New cron expression: replaces the rule (as `everyMs`, `delayMs` and
    /// `triggerAt` do), whose next trigger is computed from now; the window
    /// and policies of a recurring schedule are kept unless named. At most
    /// one of `cronExpr`, `everyMs`, `delayMs` and `triggerAt`.
    pub cron_expr: Option<String>,
    /// Time zone of `cronExpr` (kept if absent; `UTC` for a new cron rule).
    pub timezone: Option<String>,
    /// New fixed rate in ms (at least 100), from now.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub every_ms: Option<i64>,
    /// New fixed delay in ms (at least 100); the first run of the new rule
    /// is due now (or at `startAt`).
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub delay_ms: Option<i64>,
    /// New one-shot trigger (RFC 3339).
    #[schema(format = DateTime)]
    pub trigger_at: Option<String>,
    /// New start of the window of a recurring schedule; `null` removes it.
    #[serde(default, deserialize_with = "super::request::present")]
    #[schema(value_type = Option<String>, format = DateTime, nullable)]
    pub start_at: Option<Option<String>>,
    /// New end of the window of a recurring schedule; `null` removes it.
    #[serde(default, deserialize_with = "super::request::present")]
    #[schema(value_type = Option<String>, format = DateTime, nullable)]
    pub end_at: Option<Option<String>>,
    /// New misfire policy of a recurring schedule.
    #[schema(schema_with = super::misfire_schema)]
    pub misfire_policy: Option<String>,
    /// New overlap policy of a recurring schedule.
    #[schema(schema_with = super::overlap_schema)]
    pub overlap_policy: Option<String>,
    /// `true` removes the schedule: runs start only when triggered. Not
    /// with any other schedule field.
    pub unscheduled: Option<bool>,
    /// New callback URL; `null` removes it.
    #[serde(default, deserialize_with = "super::request::present")]
    #[schema(value_type = Option<String>, nullable)]
    pub callback_url: Option<Option<String>>,
}

/// One node: a job template.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowNode {
    /// Id within the workflow: 1–64 letters, digits, `-`, `_` or `.`.
    #[schema(example = "export")]
    pub id: String,
    /// Handler a worker runs.
    #[schema(example = "noop")]
    pub handler: String,
    /// Handler input, any JSON (at most 64 KiB serialized). For read keys,
    /// values under keys matching `KAIROS_API_SENSITIVE_PARAMS` (and their
    /// copies in other strings) are shown as `"••••••"`.
    #[serde(default)]
    pub params: serde_json::Value,
    /// Handler time limit in ms (1–86400000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// Attempts in all, 1–100 (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    /// Delay before the second attempt in ms, doubling after (default 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_backoff_ms: Option<i64>,
    /// Only workers of this group run it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
}

/// A parent → child dependency.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowEdge {
    /// Parent node id.
    pub from: String,
    /// Child node id.
    pub to: String,
    /// When the child may run: `onSuccess` (default) when the parent
    /// succeeded, `onFailure` when it failed after its retries, `always`
    /// when it ended at all (succeeded, failed or skipped).
    #[schema(schema_with = condition_schema)]
    pub condition: Option<String>,
}

fn condition_schema() -> utoipa::openapi::schema::Object {
    super::string_enum(
        "When the child may run",
        ["onSuccess", "onFailure", "always"],
    )
}

/// The name of an edge condition.
pub(crate) fn condition_name(c: EdgeCondition) -> &'static str {
    match c {
        EdgeCondition::OnSuccess => "onSuccess",
        EdgeCondition::OnFailure => "onFailure",
        EdgeCondition::Always => "always",
    }
}

/// A workflow.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowView {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// `active`, `paused` (no scheduled run starts, a manual trigger is
    /// refused) or `deleted`.
    #[schema(schema_with = workflow_status_schema)]
    pub status: String,
    /// Moves with each caller's change (edit, pause, resume): send it back
    /// with `PATCH`.
    pub version: i64,
    /// Where a signed run-end event is POSTed when each run ends.
    pub callback_url: Option<String>,
    /// Its nodes, in the order given.
    pub nodes: Vec<WorkflowNode>,
    /// Its edges.
    pub edges: Vec<WorkflowEdge>,
    /// The idempotency key it was created with.
    pub client_request_id: Option<String>,
    /// Its cron expression, if scheduled by one.
    pub cron_expr: Option<String>,
    /// The cron expression's time zone.
    pub timezone: Option<String>,
    /// Its fixed rate, if scheduled by one.
    pub every_ms: Option<u64>,
    /// Its fixed delay, if scheduled by one.
    pub delay_ms: Option<u64>,
    /// No scheduled run before this time; `null` if unbounded.
    #[schema(format = DateTime)]
    pub start_at: Option<String>,
    /// No scheduled run after this time; `null` if unbounded.
    #[schema(format = DateTime)]
    pub end_at: Option<String>,
    /// Misfire policy of a recurring schedule; `null` otherwise.
    #[schema(schema_with = super::misfire_schema_nullable)]
    pub misfire_policy: Option<String>,
    /// Overlap policy of a recurring schedule; `null` otherwise.
    #[schema(schema_with = super::overlap_schema_nullable)]
    pub overlap_policy: Option<String>,
    /// When its next scheduled run starts (RFC 3339); `null` without one.
    pub next_trigger_at: Option<String>,
    /// Creation time (RFC 3339).
    pub created_at: String,
    /// Last change (RFC 3339).
    pub updated_at: String,
}

fn workflow_status_schema() -> utoipa::openapi::schema::Object {
    super::string_enum("State of the workflow", ["active", "paused", "deleted"])
}

impl From<&StoredWorkflow> for WorkflowView {
    fn from(w: &StoredWorkflow) -> Self {
        let recurrence = w.schedule.as_ref().and_then(|s| s.recurrence());
        WorkflowView {
            id: w.id.clone(),
            name: w.name.clone(),
            status: w.status.as_str().to_string(),
            version: w.version,
            callback_url: w.callback_url.clone(),
            nodes: w
                .definition
                .nodes
                .iter()
                .map(|n| WorkflowNode {
                    id: n.id.clone(),
                    handler: n.handler.clone(),
                    params: n.params.clone(),
                    timeout_ms: n.timeout_ms.and_then(|t| i64::try_from(t).ok()),
                    max_attempts: Some(i64::from(n.max_attempts)),
                    retry_backoff_ms: i64::try_from(n.retry_backoff_ms).ok(),
                    worker_group: n.worker_group.clone(),
                })
                .collect(),
            edges: w
                .definition
                .edges
                .iter()
                .map(|e| WorkflowEdge {
                    from: e.from.clone(),
                    to: e.to.clone(),
                    condition: Some(condition_name(e.condition).to_string()),
                })
                .collect(),
            client_request_id: w.client_request_id.clone(),
            cron_expr: match w.schedule.as_ref().and_then(|s| s.recurrence()) {
                Some(r) => match &r.rule {
                    Rule::Cron { expr, .. } => Some(expr.clone()),
                    _ => None,
                },
                None => None,
            },
            timezone: match w.schedule.as_ref().and_then(|s| s.recurrence()) {
                Some(r) => match &r.rule {
                    Rule::Cron { tz, .. } => Some(tz.clone()),
                    _ => None,
                },
                None => None,
            },
            every_ms: match w.schedule.as_ref().and_then(|s| s.recurrence()) {
                Some(r) => match &r.rule {
                    Rule::Every { every_ms } => Some(*every_ms),
                    _ => None,
                },
                None => None,
            },
            delay_ms: match recurrence.map(|r| &r.rule) {
                Some(Rule::Delay { delay_ms }) => Some(*delay_ms),
                _ => None,
            },
            start_at: recurrence.and_then(|r| r.start_at).map(to_rfc3339),
            end_at: recurrence.and_then(|r| r.end_at).map(to_rfc3339),
            misfire_policy: recurrence.map(|r| r.misfire.as_str().to_string()),
            overlap_policy: recurrence.map(|r| r.overlap.as_str().to_string()),
            next_trigger_at: w.next_trigger_at.map(to_rfc3339),
            created_at: to_rfc3339(w.created_at),
            updated_at: to_rfc3339(w.updated_at),
        }
    }
}

/// What a create answers: the workflow and the run it started, if any.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedWorkflow {
    /// The workflow.
    pub workflow: WorkflowView,
    /// The run started with it (`runNow`), `null` otherwise and on a replay.
    pub run: Option<RunView>,
}

/// A page of workflows, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowPage {
    /// Workflows on this page.
    pub items: Vec<WorkflowView>,
    /// Cursor of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One run of a workflow.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// Run id.
    pub id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// `running`, `succeeded`, `failed` or `cancelled`.
    #[schema(schema_with = run_status_schema)]
    pub status: String,
    /// Its trigger time (RFC 3339): also the `scheduledAt` of its node executions.
    pub scheduled_at: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it ended (RFC 3339), `null` while running.
    pub finished_at: Option<String>,
}

fn run_status_schema() -> utoipa::openapi::schema::Object {
    super::string_enum(
        "State of the run",
        kairos_core::workflow::RunStatus::ALL.map(|s| s.as_str()),
    )
}

impl From<&WorkflowRun> for RunView {
    fn from(r: &WorkflowRun) -> Self {
        RunView {
            id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            status: r.status.as_str().to_string(),
            scheduled_at: to_rfc3339(r.scheduled_at),
            created_at: to_rfc3339(r.created_at),
            finished_at: r.finished_at.map(to_rfc3339),
        }
    }
}

/// A page of runs, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunPage {
    /// Runs on this page.
    pub items: Vec<RunView>,
    /// Cursor of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

impl From<Page<WorkflowRun>> for RunPage {
    fn from(p: Page<WorkflowRun>) -> Self {
        RunPage {
            items: p.items.iter().map(RunView::from).collect(),
            next_cursor: p.next_cursor,
        }
    }
}

/// One node of a run.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunNodeView {
    /// Node id.
    pub node_id: String,
    /// `waiting` (for its parents), `pending` (its execution waits for a
    /// worker or a retry), `running`, `succeeded`, `failed`, `skipped`
    /// (an edge condition can no longer be met) or `cancelled`.
    #[schema(schema_with = node_state_schema)]
    pub state: String,
    /// Its execution (`GET /openapi/executions/{id}`), once it became due.
    pub execution_id: Option<String>,
    /// That execution's state.
    pub execution_status: Option<String>,
    /// That execution's current attempt.
    pub attempt: Option<u32>,
    /// When it was decided: became due, was skipped or cancelled (RFC 3339).
    pub decided_at: Option<String>,
    /// When its current attempt started (RFC 3339).
    pub started_at: Option<String>,
    /// When its execution ended (RFC 3339).
    pub finished_at: Option<String>,
    /// From start to end of its last attempt, in ms.
    pub duration_ms: Option<i64>,
}

fn node_state_schema() -> utoipa::openapi::schema::Object {
    super::string_enum(
        "State of the node",
        [
            "waiting",
            "pending",
            "running",
            "succeeded",
            "failed",
            "skipped",
            "cancelled",
        ],
    )
}

/// What the API shows as a node's state: its own, and while its execution
/// is live, that execution's (pending or running).
pub(crate) fn node_state(n: &RunNode) -> &'static str {
    match (n.status, n.execution_status) {
        (NodeStatus::Active, Some(ExecStatus::Running)) => "running",
        (NodeStatus::Active, _) => "pending",
        (s, _) => s.as_str(),
    }
}

impl From<&RunNode> for RunNodeView {
    fn from(n: &RunNode) -> Self {
        RunNodeView {
            node_id: n.node_id.clone(),
            state: node_state(n).to_string(),
            execution_id: n.execution_id.clone(),
            execution_status: n.execution_status.map(|s| s.as_str().to_string()),
            attempt: n.attempt,
            decided_at: n.decided_at.map(to_rfc3339),
            started_at: n.started_at.map(to_rfc3339),
            finished_at: n.finished_at.map(to_rfc3339),
            duration_ms: match (n.started_at, n.finished_at) {
                (Some(s), Some(f)) => Some(f - s),
                _ => None,
            },
        }
    }
}

/// A run with its nodes, in the workflow's node order.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunDetailView {
    /// The run.
    #[serde(flatten)]
    pub run: RunView,
    /// Its nodes.
    pub nodes: Vec<RunNodeView>,
}

impl From<&RunDetail> for RunDetailView {
    fn from(d: &RunDetail) -> Self {
        RunDetailView {
            run: RunView::from(&d.run),
            nodes: d.nodes.iter().map(RunNodeView::from).collect(),
        }
    }
}

/// A job's follow-up jobs (child jobs), by id.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FollowUpsBody {
    /// Jobs triggered when an execution succeeded (at most 20).
    #[serde(default)]
    pub on_success: Vec<String>,
    /// Jobs triggered when an execution failed after its retries (at most 20).
    #[serde(default)]
    pub on_failure: Vec<String>,
}

impl From<kairos_core::workflow::followup::FollowUps> for FollowUpsBody {
    fn from(f: kairos_core::workflow::followup::FollowUps) -> Self {
        FollowUpsBody {
            on_success: f.on_success,
            on_failure: f.on_failure,
        }
    }
}
