//! `POST /openapi/jobs/batch`: up to 1,000 creates in one transaction, each
//! validated and answered on its own.

use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{
    BatchCreateRequest, BatchCreateResponse, BatchItemResult, CreateJobRequest, CreatedJob,
    MAX_BATCH,
};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJsonItems, parse_json};
use crate::request_trace::RequestTrace;
use crate::validate;
use axum::extract::State;
use axum::{Extension, Json};
use kairos_core::due::Due;
use kairos_core::job::NewJob;
use kairos_core::store::CreateOutcome;
use kairos_core::time::now_ms;

/// Create many jobs at once.
///
/// Every valid item is written in one transaction (all of them or, if the
/// database fails, none), after which the answer is sent. Each item is
/// checked as `POST /openapi/jobs` checks it and gets the status that call
/// would have answered: an invalid item or a `clientRequestId` conflict
/// fails only itself. Items with a `clientRequestId` already used with the
/// same body answer 200 with the existing job.
///
/// The batch costs one create token per valid item; a batch with more valid
/// items than the key's create burst can never pass and is refused with
/// `429 batch_exceeds_burst`: split it.
#[utoipa::path(
    post, path = "/openapi/jobs/batch", tag = "jobs",
    params(
        ("traceparent" = Option<String>, Header, description = "W3C trace context: the job's executions join this trace (an invalid value is ignored)"),
        ("tracestate" = Option<String>, Header, description = "W3C vendor trace state, passed on with the trace"),
    ),
    request_body(content = BatchCreateRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "One result per item, in order; valid items committed", body = BatchCreateResponse),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 401, description = "Missing or unusable API key", body = ErrorBody),
        (status = 403, description = "The key's role may not create jobs", body = ErrorBody),
        (status = 422, description = "`jobs` missing, empty or longer than 1,000", body = ErrorBody),
        (status = 429, description = "Create rate or live-job limit reached (`rate_limited`, `live_job_limit`), or the batch is larger than the key's create burst (`batch_exceeds_burst`: split it); see Retry-After", body = ErrorBody),
        (status = 503, description = "Database unavailable; nothing was created", body = ErrorBody),
    )
)]
pub(crate) async fn create_jobs(
    State(state): State<AppState>,
    caller: Caller,
    trace: Option<Extension<RequestTrace>>,
    ApiJsonItems(req): ApiJsonItems<BatchCreateRequest>,
) -> Result<Json<BatchCreateResponse>, ApiError> {
    // Every job of the batch joins the caller's trace.
    let job_trace = trace.and_then(|t| t.job_trace());
    if req.jobs.is_empty() || req.jobs.len() > MAX_BATCH {
        return Err(ApiError::invalid(
            "jobs",
            format!("send 1 to {MAX_BATCH} jobs (got {})", req.jobs.len()),
        ));
    }
    let now = now_ms();
    let mut results: Vec<Option<BatchItemResult>> = Vec::with_capacity(req.jobs.len());
    let mut valid: Vec<(usize, NewJob)> = Vec::new();
    for (index, item) in req.jobs.into_iter().enumerate() {
        match one(item, &state, &caller.tenant, now) {
            Ok(mut job) => {
                job.trace = job_trace.clone();
                valid.push((index, job));
                results.push(None);
            }
            Err(e) => results.push(Some(failed(index, &e))),
        }
    }
    let (indexes, jobs): (Vec<usize>, Vec<NewJob>) = valid.into_iter().unzip();
    let hashes: Vec<Option<String>> = jobs.iter().map(|j| j.request_hash.clone()).collect();
    let outcomes = if jobs.is_empty() {
        Vec::new()
    } else {
        let n = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
        limits::admit_creates(&state, &caller, n).await?;
        state.store.jobs_create_many(jobs).await?
    };
    let mut created = 0usize;
    let mut earliest = None;
    for ((index, hash), outcome) in indexes.into_iter().zip(hashes).zip(outcomes) {
        let result = match outcome {
            CreateOutcome::Created(job) => {
                created += 1;
                state.auth.live.created(&caller.tenant);
                if let Some(due) = job.next_trigger_at {
                    earliest = Some(earliest.map_or(due, |e: i64| e.min(due)));
                }
                done(index, 201, CreatedJob::from(&job))
            }
            CreateOutcome::Existing(job) if job.request_hash == hash => {
                done(index, 200, CreatedJob::from(&job))
            }
            CreateOutcome::Existing(job) => failed(
                index,
                &ApiError::IdempotencyConflict(format!(
                    "clientRequestId {:?} was already used for a different request (job {})",
                    job.client_request_id.unwrap_or_default(),
                    job.id
                )),
            ),
        };
        results[index] = Some(result);
    }
    if created > 0 {
        // One entry for the request: a thousand rows would cost more than the
        // creates, and the jobs carry their own creation time.
        let target = format!("{created} jobs");
        state
            .audit(&caller, &caller.tenant, "job.create_batch", &target)
            .await;
    }
    // One wake-up is enough: the leader then sees every trigger in its look-ahead.
    if let Some(due) = earliest {
        (state.notify_due)(Due::At(due));
    }
    Ok(Json(BatchCreateResponse {
        results: results.into_iter().flatten().collect(),
    }))
}

/// One item, parsed and checked exactly as a single create is.
fn one(
    item: serde_json::Value,
    state: &AppState,
    tenant: &str,
    now: i64,
) -> Result<NewJob, ApiError> {
    let bytes = serde_json::to_vec(&item).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let req: CreateJobRequest = parse_json(&bytes)?;
    validate::new_job(
        req,
        &state.config,
        tenant,
        uuid::Uuid::now_v7().to_string(),
        now,
    )
}

fn done(index: usize, status: u16, job: CreatedJob) -> BatchItemResult {
    BatchItemResult {
        index,
        status,
        job: Some(job),
        error: None,
    }
}

fn failed(index: usize, e: &ApiError) -> BatchItemResult {
    BatchItemResult {
        index,
        status: e.status().as_u16(),
        job: None,
        error: Some(ErrorBody::from(e).error),
    }
}
