//! Workflows (issue 34): `POST/GET /openapi/workflows`,
//! `GET/DELETE /openapi/workflows/{id}`, `POST …/{id}/trigger`,
//! `GET …/{id}/runs`, `GET …/{id}/runs/{runId}` and
//! `POST …/{id}/runs/{runId}/cancel` (`PATCH`, pause and resume are in
//! `workflow_control`). Tenant-scoped like jobs (another
//! tenant's ids answer 404), audited like the job controls.

use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{
    CreateWorkflowRequest, CreatedWorkflow, PageQuery, RunDetailView, RunPage, RunView,
    WorkflowPage, WorkflowView,
};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::shown;
use crate::validate;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kairos_core::due::Due;
use kairos_core::time::now_ms;
use kairos_core::workflow::{RunControl, WorkflowCreated, WorkflowTriggered};

pub(super) fn workflow_not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no workflow with id {id:?}"))
}

fn run_not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no run with id {id:?}"))
}

/// Create a workflow: a DAG of job templates. Validated as a DAG (422
/// `invalid_workflow` naming the offending node); with `runNow` (the
/// default) its first run starts in the same transaction. A repeated
/// `clientRequestId` with the same body returns the existing workflow
/// (200), with a different body 409.
#[utoipa::path(
    post, path = "/openapi/workflows", tag = "workflows",
    request_body(content = CreateWorkflowRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created and committed", body = CreatedWorkflow),
        (status = 200, description = "Replay of an earlier create with the same clientRequestId and body", body = CreatedWorkflow),
        (status = 409, description = "clientRequestId already used for a different request", body = ErrorBody),
        (status = 422, description = "A field is invalid, or the graph is no valid DAG (`invalid_workflow`, with `node` and `reason`)", body = ErrorBody),
        (status = 429, description = "The key's create or action rate is used up, or the tenant's live jobs (node jobs included) would pass its cap (`live_job_limit`)", body = ErrorBody),
    )
)]
pub(crate) async fn create_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateWorkflowRequest>,
) -> Result<(StatusCode, Json<CreatedWorkflow>), ApiError> {
    let now = now_ms();
    let wf = validate::workflow::new_workflow(
        req,
        &state.config,
        &caller.tenant,
        uuid::Uuid::now_v7().to_string(),
        now,
    )?;
    // Each node is backed by a job: they count against the key's create
    // rate and the tenant's live-jobs cap like the jobs they are, and the
    // first run is an action.
    let node_jobs = u32::try_from(wf.definition.nodes.len()).unwrap_or(u32::MAX);
    limits::admit_creates(&state, &caller, node_jobs).await?;
    limits::admit_action(&state, &caller)?;
    let hash = wf.request_hash.clone();
    match state.store.workflow_create(wf).await? {
        WorkflowCreated::Created(wf, run) => {
            state.auth.live.created_many(&caller.tenant, node_jobs);
            state
                .audit(&caller, &caller.tenant, "workflow.create", &wf.id)
                .await;
            if run.is_some() {
                (state.notify_due)(Due::Pending);
            }
            Ok((
                StatusCode::CREATED,
                Json(CreatedWorkflow {
                    workflow: shown::workflow(&state, &caller, &wf),
                    run: run.as_ref().map(RunView::from),
                }),
            ))
        }
        WorkflowCreated::Existing(wf) if wf.request_hash == hash => Ok((
            StatusCode::OK,
            Json(CreatedWorkflow {
                workflow: shown::workflow(&state, &caller, &wf),
                run: None,
            }),
        )),
        WorkflowCreated::Existing(wf) => Err(ApiError::IdempotencyConflict(format!(
            "clientRequestId {:?} was already used for a different request (workflow {}); \
             send the same body to get that workflow, or use a new clientRequestId",
            wf.client_request_id.unwrap_or_default(),
            wf.id
        ))),
    }
}

/// List workflows, newest first (deleted ones are left out).
#[utoipa::path(
    get, path = "/openapi/workflows", tag = "workflows",
    params(PageQuery),
    responses((status = 200, description = "A page of workflows", body = WorkflowPage))
)]
pub(crate) async fn list_workflows(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<WorkflowPage>, ApiError> {
    let limit = validate::page_limit(q.limit.as_deref())?;
    let cursor = q.cursor.filter(|c| !c.is_empty());
    let page = state
        .store
        .workflows_list(&caller.tenant, limit, cursor.as_deref())
        .await?;
    Ok(Json(shown::workflow_page(&state, &caller, page)))
}

/// Get a workflow.
#[utoipa::path(
    get, path = "/openapi/workflows/{id}", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses(
        (status = 200, description = "The workflow", body = WorkflowView),
        (status = 404, description = "No such workflow", body = ErrorBody),
    )
)]
pub(crate) async fn get_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<WorkflowView>, ApiError> {
    let wf = state
        .store
        .workflow_get(&caller.tenant, &id)
        .await?
        .ok_or_else(|| workflow_not_found(&id))?;
    Ok(Json(shown::workflow(&state, &caller, &wf)))
}

/// Delete a workflow: no new runs; its running runs are cancelled (their
/// pending nodes cancelled, a stop requested for the running ones).
#[utoipa::path(
    delete, path = "/openapi/workflows/{id}", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such workflow (or already deleted)", body = ErrorBody),
    )
)]
pub(crate) async fn delete_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if !state
        .store
        .workflow_delete(&caller.tenant, &id, now_ms())
        .await?
    {
        return Err(workflow_not_found(&id));
    }
    state
        .audit(&caller, &caller.tenant, "workflow.delete", &id)
        .await;
    Ok(StatusCode::NO_CONTENT)
}

/// Start a run now: its root nodes' executions are created at once, due
/// now. Counts against the key's action rate.
#[utoipa::path(
    post, path = "/openapi/workflows/{id}/trigger", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses(
        (status = 202, description = "A run was started", body = RunView),
        (status = 404, description = "No such workflow (or deleted)", body = ErrorBody),
        (status = 409, description = "The workflow is paused", body = ErrorBody),
        (status = 429, description = "The key's action rate is used up; see Retry-After", body = ErrorBody),
    )
)]
pub(crate) async fn trigger_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    limits::admit_action(&state, &caller)?;
    let now = now_ms();
    let run_id = uuid::Uuid::now_v7().to_string();
    let run = match state
        .store
        .workflow_trigger(&caller.tenant, &id, &run_id, now)
        .await?
    {
        WorkflowTriggered::Started(run) => run,
        WorkflowTriggered::NotFound => return Err(workflow_not_found(&id)),
        WorkflowTriggered::Paused => {
            return Err(ApiError::InvalidState(format!(
                "workflow {id} is paused; only active workflows can be triggered (resume it first)"
            )));
        }
    };
    state
        .audit(&caller, &caller.tenant, "workflow.trigger", &id)
        .await;
    (state.notify_due)(Due::Pending);
    Ok((StatusCode::ACCEPTED, Json(RunView::from(&run))))
}

/// A workflow's runs, newest first.
#[utoipa::path(
    get, path = "/openapi/workflows/{id}/runs", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id"), PageQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunPage),
        (status = 404, description = "No such workflow", body = ErrorBody),
    )
)]
pub(crate) async fn list_runs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<RunPage>, ApiError> {
    let limit = validate::page_limit(q.limit.as_deref())?;
    let cursor = q.cursor.filter(|c| !c.is_empty());
    state
        .store
        .workflow_get(&caller.tenant, &id)
        .await?
        .ok_or_else(|| workflow_not_found(&id))?;
    let page = state
        .store
        .workflow_runs_list(&caller.tenant, &id, limit, cursor.as_deref())
        .await?;
    Ok(Json(page.into()))
}

/// One run with each node's state, timings and execution id.
#[utoipa::path(
    get, path = "/openapi/workflows/{id}/runs/{runId}", tag = "workflows",
    params(
        ("id" = String, Path, description = "Workflow id"),
        ("runId" = String, Path, description = "Run id"),
    ),
    responses(
        (status = 200, description = "The run", body = RunDetailView),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub(crate) async fn get_run(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, run_id)): ApiPath<(String, String)>,
) -> Result<Json<RunDetailView>, ApiError> {
    let detail = state
        .store
        .workflow_run_get(&caller.tenant, &id, &run_id)
        .await?
        .ok_or_else(|| run_not_found(&run_id))?;
    Ok(Json(RunDetailView::from(&detail)))
}

/// Cancel a run: its waiting and pending nodes are cancelled, a stop is
/// requested for the running ones, and the run ends `cancelled`.
#[utoipa::path(
    post, path = "/openapi/workflows/{id}/runs/{runId}/cancel", tag = "workflows",
    params(
        ("id" = String, Path, description = "Workflow id"),
        ("runId" = String, Path, description = "Run id"),
    ),
    responses(
        (status = 200, description = "Cancelled", body = RunView),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run already ended", body = ErrorBody),
    )
)]
pub(crate) async fn cancel_run(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, run_id)): ApiPath<(String, String)>,
) -> Result<Json<RunView>, ApiError> {
    let outcome = state
        .store
        .workflow_run_cancel(&caller.tenant, &id, &run_id, now_ms())
        .await?;
    let run = match outcome {
        RunControl::Done(run) => run,
        RunControl::NotFound => return Err(run_not_found(&run_id)),
        RunControl::Conflict(run) => {
            return Err(ApiError::InvalidState(format!(
                "run {run_id} is {}; only running runs can be cancelled",
                run.status.as_str()
            )));
        }
    };
    state
        .audit(&caller, &caller.tenant, "workflow.run.cancel", &run_id)
        .await;
    Ok(Json(RunView::from(&run)))
}
