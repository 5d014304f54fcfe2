//! A caller's control of a workflow, as for jobs: `PATCH
//! /openapi/workflows/{id}` (at the version read; a new graph is checked as
//! at create, and runs already started keep theirs), and `POST …/{id}/pause`
//! and `…/{id}/resume`. Tenant-scoped, `write` keys, audited
//! (`workflow.edit`, `workflow.pause`, `workflow.resume`).

use super::workflows::workflow_not_found;
use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{PatchWorkflowRequest, WorkflowView};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use crate::validate;
use axum::Json;
use axum::extract::State;
use kairos_core::time::now_ms;
use kairos_core::workflow::{
    StoredWorkflow, WorkflowControl, WorkflowStatus, WorkflowTransition, WorkflowUpdated,
};

fn version_conflict(wf: &StoredWorkflow, sent: i64) -> ApiError {
    ApiError::VersionConflict(format!(
        "workflow {} is at version {}, not {sent}: someone changed it since it was read; \
         read it again and reapply the change",
        wf.id, wf.version
    ))
}

fn deleted(wf: &StoredWorkflow) -> ApiError {
    ApiError::InvalidState(format!(
        "workflow {} is deleted; a deleted workflow cannot be changed",
        wf.id
    ))
}

/// Turns a pause or resume outcome into the workflow, a 404 or a 409 naming
/// the status.
fn applied(
    outcome: WorkflowControl,
    id: &str,
    t: WorkflowTransition,
    action: &str,
) -> Result<StoredWorkflow, ApiError> {
    match outcome {
        WorkflowControl::Done(wf) => Ok(wf),
        WorkflowControl::NotFound => Err(workflow_not_found(id)),
        WorkflowControl::Conflict(wf) => {
            let allowed: Vec<_> = t.from_states().iter().map(|s| s.as_str()).collect();
            Err(ApiError::InvalidState(format!(
                "workflow {id} is {}; only {} workflows can be {action}",
                wf.status.as_str(),
                allowed.join(" or ")
            )))
        }
    }
}

/// Change a workflow.
///
/// Send the `version` you read and only the fields to change: `name`,
/// `nodes` and/or `edges` (the graph is checked as at create, with the
/// half not sent as it is: 422 `invalid_workflow` naming the offending
/// node), a new schedule (`cronExpr`/`timezone`, `everyMs` or `triggerAt`,
/// its next trigger computed from now; `unscheduled: true` removes it), or
/// `callbackUrl` (`null` removes it). Runs already started keep the graph
/// they started with; runs started from now on follow the new one.
#[utoipa::path(
    patch, path = "/openapi/workflows/{id}", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    request_body(content = PatchWorkflowRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Changed; the workflow as it is now", body = WorkflowView),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such workflow", body = ErrorBody),
        (status = 409, description = "`version_conflict`: someone changed the workflow (edit, pause, resume) since `version` was read; `invalid_state`: it is deleted", body = ErrorBody),
        (status = 413, description = "Body or params too large", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "A field is missing, unknown or invalid, or the graph is no valid DAG (`invalid_workflow`, with `node` and `reason`)", body = ErrorBody),
        (status = 429, description = "Nodes whose template changed get new jobs: the key's create rate is used up, or the tenant's live jobs would pass its cap (`live_job_limit`)", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn update_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<PatchWorkflowRequest>,
) -> Result<Json<WorkflowView>, ApiError> {
    let tenant = &caller.tenant;
    let now = now_ms();
    let wf = state
        .store
        .workflow_get(tenant, &id)
        .await?
        .ok_or_else(|| workflow_not_found(&id))?;
    if wf.version != req.version {
        return Err(version_conflict(&wf, req.version));
    }
    if wf.status == WorkflowStatus::Deleted {
        return Err(deleted(&wf));
    }
    let update = validate::workflow::update(&req, &wf, &state.config, now)?;
    // A node whose template changed gets a new job (the old one stays for
    // the runs that follow the old graph): each counts as a create.
    let changed = update.definition.as_ref().filter(|d| **d != wf.definition);
    let fresh = changed.map_or(0, |def| {
        def.nodes
            .iter()
            .filter(|n| !wf.definition.nodes.contains(n) || !wf.node_jobs.contains_key(&n.id))
            .count()
    });
    let fresh = u32::try_from(fresh).unwrap_or(u32::MAX);
    if fresh > 0 {
        limits::admit_creates(&state, &caller, fresh).await?;
    }
    match state
        .store
        .workflow_update(tenant, &id, req.version, &update, now)
        .await?
    {
        WorkflowUpdated::Done(new) => {
            state.auth.live.created_many(tenant, fresh);
            state.audit(&caller, tenant, "workflow.edit", &id).await;
            Ok(Json(crate::shown::workflow(&state, &caller, &new)))
        }
        WorkflowUpdated::NotFound => Err(workflow_not_found(&id)),
        WorkflowUpdated::VersionConflict(w) => Err(version_conflict(&w, req.version)),
        WorkflowUpdated::Conflict(w) => Err(deleted(&w)),
    }
}

/// Pause a workflow: no scheduled run starts and a manual trigger answers
/// 409 until it is resumed; runs already started go on.
#[utoipa::path(
    post, path = "/openapi/workflows/{id}/pause", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses(
        (status = 200, description = "Paused", body = WorkflowView),
        (status = 404, description = "No such workflow", body = ErrorBody),
        (status = 409, description = "The workflow is not active (already paused, or deleted)", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn pause_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<WorkflowView>, ApiError> {
    let t = WorkflowTransition::Pause;
    let outcome = state
        .store
        .workflow_pause(&caller.tenant, &id, now_ms())
        .await?;
    let wf = applied(outcome, &id, t, "paused")?;
    state
        .audit(&caller, &caller.tenant, "workflow.pause", &id)
        .await;
    Ok(Json(crate::shown::workflow(&state, &caller, &wf)))
}

/// Resume a paused workflow; a scheduled trigger missed while paused fires
/// once. Counts against the key's action rate.
#[utoipa::path(
    post, path = "/openapi/workflows/{id}/resume", tag = "workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses(
        (status = 200, description = "Resumed", body = WorkflowView),
        (status = 404, description = "No such workflow", body = ErrorBody),
        (status = 409, description = "The workflow is not paused", body = ErrorBody),
        (status = 429, description = "The key's action rate is used up; see Retry-After", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn resume_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<WorkflowView>, ApiError> {
    // A resume fires a trigger missed while paused: pause/resume in a loop
    // would start runs like triggers do.
    limits::admit_action(&state, &caller)?;
    let t = WorkflowTransition::Resume;
    let outcome = state
        .store
        .workflow_resume(&caller.tenant, &id, now_ms())
        .await?;
    let wf = applied(outcome, &id, t, "resumed")?;
    state
        .audit(&caller, &caller.tenant, "workflow.resume", &id)
        .await;
    Ok(Json(crate::shown::workflow(&state, &caller, &wf)))
}
