//! `PATCH /openapi/jobs/{id}`: change a job's schedule, params and policies
//! at the version the caller read.

use super::job_not_found;
use crate::AppState;
use crate::auth::Caller;
use crate::dto::{JobView, PatchJobRequest};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use crate::validate;
use axum::Json;
use axum::extract::State;
use kairos_core::due::Due;
use kairos_core::job::{Job, JobTransition};
use kairos_core::store::UpdateOutcome;
use kairos_core::time::now_ms;

fn version_conflict(job: &Job, sent: i64) -> ApiError {
    ApiError::VersionConflict(format!(
        "job {} is at version {}, not {sent}: someone changed it since it was read; \
         read it again and reapply the change",
        job.id, job.revision
    ))
}

fn finished(job: &Job) -> ApiError {
    ApiError::InvalidState(format!(
        "job {} is {}; a finished job cannot be changed",
        job.id,
        job.status.as_str()
    ))
}

/// Change a job.
///
/// Send the `version` you read and only the fields to change (`null` clears
/// `startAt`, `endAt`, `callbackUrl` and `timeoutMs`). The version moves
/// only with callers' changes (edits, pause, resume, cancel), not with the
/// job's triggers and results, so a job that fires every second can be
/// changed at the version just read. A new schedule
/// recomputes the next trigger from now; an `endAt` before it ends the job
/// (after its running execution, if any). Refused as a whole on bad input.
#[utoipa::path(
    patch, path = "/openapi/jobs/{id}", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    request_body(content = PatchJobRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Changed; the job as it is now", body = JobView),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "`version_conflict`: someone changed the job (edit, pause, resume, cancel) since `version` was read; `invalid_state`: the job is finished, or a one-shot that already fired cannot be rescheduled", body = ErrorBody),
        (status = 413, description = "Body or params too large", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "A field is missing, unknown or invalid", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn update_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<PatchJobRequest>,
) -> Result<Json<JobView>, ApiError> {
    let tenant = &caller.tenant;
    let now = now_ms();
    let job = state
        .store
        .job_get(tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    if job.revision != req.version {
        return Err(version_conflict(&job, req.version));
    }
    if job.status.is_terminal() {
        return Err(finished(&job));
    }
    let update = validate::job_update(&job, &req, &state.config, now)?;
    match state
        .store
        .job_update(tenant, &id, req.version, &update, now)
        .await?
    {
        UpdateOutcome::Done(new) => {
            state.audit(&caller, tenant, "job.edit", &id).await;
            let sooner = match (new.next_trigger_at, job.next_trigger_at) {
                (Some(due), Some(old)) => due < old,
                (due, None) => due.is_some(),
                (None, Some(_)) => false,
            };
            if sooner
                && JobTransition::Claim.allowed_from(new.status)
                && let Some(due) = new.next_trigger_at
            {
                (state.notify_due)(Due::At(due));
            }
            Ok(Json(new.into()))
        }
        UpdateOutcome::NotFound => Err(job_not_found(&id)),
        UpdateOutcome::VersionConflict(j) => Err(version_conflict(&j, req.version)),
        UpdateOutcome::Conflict(j) if j.status.is_terminal() => Err(finished(&j)),
        UpdateOutcome::Conflict(j) => Err(ApiError::InvalidState(format!(
            "job {} is a one-shot whose trigger already fired; its schedule can no longer change",
            j.id
        ))),
    }
}
