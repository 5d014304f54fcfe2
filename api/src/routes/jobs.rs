//! `POST /openapi/jobs`, `GET /openapi/jobs`, `GET /openapi/jobs/{id}`.

use super::job_not_found;
use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{CreateJobRequest, CreatedJob, JobDetail, JobPage, ListJobsQuery};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::request_trace::RequestTrace;
use crate::{shown, validate};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use kairos_core::due::Due;
use kairos_core::store::{CreateOutcome, JobFilter};
use kairos_core::time::now_ms;

/// Create a job.
///
/// Answers only after the job is committed. With a `clientRequestId` that was
/// already used, the same body returns the existing job (200) and a different
/// body is refused (409).
#[utoipa::path(
    post, path = "/openapi/jobs", tag = "jobs",
    params(
        ("traceparent" = Option<String>, Header, description = "W3C trace context: the job's executions join this trace (an invalid value is ignored)"),
        ("tracestate" = Option<String>, Header, description = "W3C vendor trace state, passed on with the trace"),
    ),
    request_body(content = CreateJobRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created and committed", body = CreatedJob),
        (status = 200, description = "Replay of an earlier create with the same clientRequestId and body", body = CreatedJob),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 409, description = "clientRequestId already used for a different request", body = ErrorBody),
        (status = 413, description = "Body or params too large", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "A field is missing, unknown or invalid", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn create_job(
    State(state): State<AppState>,
    caller: Caller,
    trace: Option<Extension<RequestTrace>>,
    ApiJson(req): ApiJson<CreateJobRequest>,
) -> Result<(StatusCode, Json<CreatedJob>), ApiError> {
    let now = now_ms();
    let mut job = validate::new_job(
        req,
        &state.config,
        &caller.tenant,
        uuid::Uuid::now_v7().to_string(),
        now,
    )?;
    // Audited by the store, in the job's own transaction.
    job.created_by = Some(caller.prefix.clone());
    job.trace = trace.and_then(|t| t.job_trace());
    limits::admit_create(&state, &caller).await?;
    let hash = job.request_hash.clone();
    match state.store.job_create(job).await? {
        CreateOutcome::Created(job) => {
            state.auth.live.created(&caller.tenant);
            if let Some(due) = job.next_trigger_at {
                (state.notify_due)(Due::At(due));
            }
            Ok((StatusCode::CREATED, Json(CreatedJob::from(&job))))
        }
        CreateOutcome::Existing(job) if job.request_hash == hash => {
            Ok((StatusCode::OK, Json(CreatedJob::from(&job))))
        }
        CreateOutcome::Existing(job) => Err(ApiError::IdempotencyConflict(format!(
            "clientRequestId {:?} was already used for a different request (job {}); \
             send the same body to get that job, or use a new clientRequestId",
            job.client_request_id.unwrap_or_default(),
            job.id
        ))),
    }
}

/// Get a job with its newest execution.
#[utoipa::path(
    get, path = "/openapi/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = JobDetail),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobDetail>, ApiError> {
    let tenant = &caller.tenant;
    let job = state
        .store
        .job_get(tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    let last = state
        .store
        .executions_list_for_job(tenant, &id, 1, None)
        .await?;
    let routable = crate::waiting::routable(state.store.as_ref()).await?;
    let redactor = shown::redactor(&state, &caller, &job);
    let last_execution = last
        .items
        .into_iter()
        .next()
        .map(|e| shown::execution(redactor.as_ref(), crate::waiting::view(&job, e, &routable)));
    Ok(Json(JobDetail {
        waiting_for: last_execution.as_ref().and_then(|e| e.waiting_for.clone()),
        job: shown::job(&state, &caller, job),
        last_execution,
    }))
}

/// List jobs, newest first.
#[utoipa::path(
    get, path = "/openapi/jobs", tag = "jobs",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 422, description = "Unknown status or health, or bad limit", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListJobsQuery>,
) -> Result<Json<JobPage>, ApiError> {
    let filter = JobFilter {
        status: validate::job_status(q.status.as_deref())?,
        health: validate::job_health(q.health.as_deref())?,
        limit: validate::page_limit(q.limit.as_deref())?,
        cursor: q.cursor.filter(|c| !c.is_empty()),
        ..JobFilter::default()
    };
    let page = state.store.job_list(&caller.tenant, &filter).await?;
    Ok(Json(JobPage {
        items: page
            .items
            .into_iter()
            .map(|job| shown::job(&state, &caller, job))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}
