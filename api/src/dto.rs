//! Request and response bodies of the API (camelCase JSON), each with its
//! OpenAPI schema. Conversions from the core types live beside each body.

mod admin;
mod batch;
mod callback;
mod concurrency;
mod execution;
mod health;
mod job;
mod logs;
mod preview;
mod request;
mod retention;
mod worker;
mod workflow;

pub use admin::{
    AuditPage, AuditQuery, AuditView, CreateKeyRequest, CreateTenantRequest, CreatedKey,
    CreatedTenant, KeyList, KeyView, KeysQuery, RotateSecretRequest, RotatedSecret,
    TenantLimitsRequest, TenantList, TenantView,
};
pub use batch::{BatchCreateRequest, BatchCreateResponse, BatchItemResult, MAX_BATCH};
pub use callback::{CallbackAttemptView, CallbackList, CallbackView};
pub use concurrency::{ConcurrencyLimitList, ConcurrencyLimitRequest, ConcurrencyLimitView};
pub use execution::{ExecEventView, ExecutionDetail, ExecutionPage, ExecutionView, WaitingFor};
pub use health::{HealthBody, ReadyBody};
pub use job::{CreatedJob, JobDetail, JobPage, JobView, TriggeredExecution};
pub use logs::{LogLineView, LogPage};
pub use preview::{PreviewTrigger, SchedulePreview, SchedulePreviewRequest};
pub use request::{
    CreateJobRequest, ListExecutionsQuery, ListJobsQuery, PageQuery, PatchJobRequest, PauseRequest,
};
pub use retention::{TenantRetentionRequest, TenantRetentionView};
pub use worker::{WorkerList, WorkerView};
pub use workflow::{
    CreateWorkflowRequest, CreatedWorkflow, FollowUpsBody, PatchWorkflowRequest, RunDetailView,
    RunNodeView, RunPage, RunView, WorkflowEdge, WorkflowNode, WorkflowPage, WorkflowView,
};

use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobHealth, JobStatus};
use kairos_core::schedule::{MisfirePolicy, OverlapPolicy};
use kairos_core::time::{Millis, to_rfc3339};
use kairos_core::worker::WorkerState;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// A string schema listing `values`; built from the core enums so the
/// document can never drift from the states the code knows.
fn string_enum<'a>(description: &str, values: impl IntoIterator<Item = &'a str>) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .build()
}

pub(crate) fn job_status_schema() -> Object {
    string_enum("Job status.", JobStatus::ALL.iter().map(|s| s.as_str()))
}

pub(crate) fn job_health_schema() -> Object {
    string_enum(
        "Job health: `failing` for a recurring job whose last 3 finished runs failed (failed, timed out or lost), else `ok`.",
        JobHealth::ALL.iter().map(|h| h.as_str()),
    )
}

/// Execution status where there may be none yet: `null`.
pub(crate) fn exec_status_schema_nullable() -> Object {
    nullable(exec_status_schema())
}

pub(crate) fn exec_status_schema() -> Object {
    string_enum(
        "Execution status.",
        ExecStatus::ALL.iter().map(|s| s.as_str()),
    )
}

pub(crate) fn misfire_schema() -> Object {
    string_enum(
        "Misfire policy of a recurring job: `fireOnce` (default: one catch-up \
         execution, then on from now), `skip` (no catch-up), `fireAll` (one \
         execution per missed trigger, at most 100 per job per dispatch round).",
        MisfirePolicy::ALL.iter().map(|p| p.as_str()),
    )
}

pub(crate) fn execution_mode_schema() -> Object {
    string_enum(
        "Executions per trigger: `single` (default: one), `broadcast` (one per \
         live worker serving the handler in the job's group), `sharded` \
         (`shardCount` of them, each with its shard index).",
        kairos_core::shard::ExecutionMode::NAMES.iter().copied(),
    )
}

pub(crate) fn overlap_schema() -> Object {
    string_enum(
        "Overlap policy of a recurring job: `allow` (default: run beside the \
         previous execution), `forbid` (record the trigger as a `skipped` \
         execution), `replace` (ask the previous execution to stop, run the new one).",
        OverlapPolicy::ALL.iter().map(|p| p.as_str()),
    )
}

/// `schema` that also accepts `null` (OpenAPI 3.1: `type: [string, null]`
/// and `null` among the enum values).
fn nullable(schema: Object) -> Object {
    let mut values: Vec<serde_json::Value> = schema.enum_values.clone().unwrap_or_default();
    values.push(serde_json::Value::Null);
    ObjectBuilder::from(schema)
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(values))
        .build()
}

/// Misfire policy as a job reports it: `null` for a one-shot.
pub(crate) fn misfire_schema_nullable() -> Object {
    nullable(misfire_schema())
}

/// Overlap policy as a job reports it: `null` for a one-shot.
pub(crate) fn overlap_schema_nullable() -> Object {
    nullable(overlap_schema())
}

pub(crate) fn worker_state_schema() -> Object {
    let all = [
        WorkerState::Online,
        WorkerState::Draining,
        WorkerState::Offline,
    ];
    string_enum("Worker state.", all.iter().map(|s| s.as_str()))
}

fn time(ms: Millis) -> String {
    to_rfc3339(ms)
}

fn opt_time(ms: Option<Millis>) -> Option<String> {
    ms.map(to_rfc3339)
}
