//! Control of a job by its caller: pause, resume, trigger now, cancel.

use super::job_not_found;
use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{JobView, PauseRequest, TriggeredExecution};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiPath, MaybeJson};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kairos_core::due::Due;
use kairos_core::job::{Job, JobStatus, JobTransition};
use kairos_core::store::ControlOutcome;
use kairos_core::time::now_ms;

/// Longest pause reason (the column holds 500).
const MAX_REASON_CHARS: usize = 500;

/// Turns a control outcome into the job, a 404 or a 409 naming the status.
fn applied(
    outcome: ControlOutcome,
    id: &str,
    action: &str,
    allowed: &[JobStatus],
) -> Result<Job, ApiError> {
    match outcome {
        ControlOutcome::Done(job) => Ok(job),
        ControlOutcome::NotFound => Err(job_not_found(id)),
        ControlOutcome::Conflict(job) => {
            let allowed: Vec<_> = allowed.iter().map(|s| s.as_str()).collect();
            Err(ApiError::InvalidState(format!(
                "job {id} is {}; only {} jobs can be {action}",
                job.status.as_str(),
                allowed.join(" or ")
            )))
        }
    }
}

/// Pause a job: its triggers are not fired until it is resumed. The body
/// may give a `reason`, shown on the job as `pauseReason` until then.
#[utoipa::path(
    post, path = "/openapi/jobs/{id}/pause", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    request_body(content = Option<PauseRequest>, content_type = "application/json",
        description = "Optional: why the job is paused"),
    responses(
        (status = 200, description = "Paused", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job's status does not allow it", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn pause_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    MaybeJson(body): MaybeJson<PauseRequest>,
) -> Result<Json<JobView>, ApiError> {
    let reason = body
        .and_then(|b| b.reason)
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty());
    if let Some(r) = &reason {
        let n = r.chars().count();
        if n > MAX_REASON_CHARS {
            return Err(ApiError::invalid(
                "reason",
                format!("reason must be at most {MAX_REASON_CHARS} characters, got {n}"),
            ));
        }
    }
    let outcome = state
        .store
        .job_pause(&caller.tenant, &id, reason.as_deref(), now_ms())
        .await?;
    let job = applied(outcome, &id, "paused", JobTransition::Pause.from_states())?;
    state.audit(&caller, &caller.tenant, "job.pause", &id).await;
    Ok(Json(job.into()))
}

/// Resume a paused job; a trigger missed while paused fires once. Counts
/// against the key's action rate.
#[utoipa::path(
    post, path = "/openapi/jobs/{id}/resume", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "Resumed", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is not paused", body = ErrorBody),
        (status = 429, description = "The key's action rate is used up; see Retry-After", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn resume_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobView>, ApiError> {
    // A resume fires a trigger missed while paused: pause/resume in a loop
    // would make executions like triggers do.
    limits::admit_action(&state, &caller)?;
    let outcome = state
        .store
        .job_resume(&caller.tenant, &id, now_ms())
        .await?;
    let job = applied(outcome, &id, "resumed", JobTransition::Resume.from_states())?;
    state
        .audit(&caller, &caller.tenant, "job.resume", &id)
        .await;
    if let Some(due) = job.next_trigger_at {
        (state.notify_due)(Due::At(due));
    }
    Ok(Json(job.into()))
}

/// Run a job once now, outside its schedule. Counts against the key's
/// action rate.
#[utoipa::path(
    post, path = "/openapi/jobs/{id}/trigger", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 202, description = "An execution due now was added", body = TriggeredExecution),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job is paused or finished", body = ErrorBody),
        (status = 429, description = "The key's action rate is used up; see Retry-After", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn trigger_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<TriggeredExecution>), ApiError> {
    limits::admit_action(&state, &caller)?;
    let now = now_ms();
    let execution_id = uuid::Uuid::now_v7().to_string();
    let outcome = state
        .store
        .job_trigger_now(&caller.tenant, &id, &execution_id, now)
        .await?;
    let job = applied(
        outcome,
        &id,
        "triggered",
        &[JobStatus::Scheduled, JobStatus::Running],
    )?;
    state
        .audit(&caller, &caller.tenant, "job.trigger", &id)
        .await;
    (state.notify_due)(Due::Pending);
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggeredExecution {
            job_id: job.id,
            execution_id,
        }),
    ))
}

/// Cancel a job; its pending executions are cancelled too.
#[utoipa::path(
    delete, path = "/openapi/jobs/{id}", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "Cancelled", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job already finished", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn cancel_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobView>, ApiError> {
    let outcome = state
        .store
        .job_cancel(&caller.tenant, &id, now_ms())
        .await?;
    let job = applied(
        outcome,
        &id,
        "cancelled",
        JobTransition::Cancel.from_states(),
    )?;
    state
        .audit(&caller, &caller.tenant, "job.cancel", &id)
        .await;
    Ok(Json(job.into()))
}
