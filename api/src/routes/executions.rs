//! `GET /openapi/jobs/{id}/executions`, `GET /openapi/executions` (across
//! the tenant's jobs, filtered), `GET /openapi/executions/{id}` and its logs.

use super::{execution_not_found, job_not_found};
use crate::AppState;
use crate::auth::Caller;
use crate::dto::{ExecutionDetail, ExecutionPage, ListExecutionsQuery, LogPage, PageQuery};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiPath, ApiQuery};
use crate::{shown, validate, waiting};
use axum::Json;
use axum::extract::State;
use kairos_core::overview::ExecFilter;
use std::collections::HashMap;

/// List a job's executions, newest trigger first.
#[utoipa::path(
    get, path = "/openapi/jobs/{id}/executions", tag = "executions",
    params(("id" = String, Path, description = "Job id"), PageQuery),
    responses(
        (status = 200, description = "A page of executions", body = ExecutionPage),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 422, description = "Bad limit", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_job_executions(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<ExecutionPage>, ApiError> {
    let limit = validate::page_limit(q.limit.as_deref())?;
    let tenant = &caller.tenant;
    // An empty page would not tell an unknown job from one that never fired.
    let Some(job) = state.store.job_get(tenant, &id).await? else {
        return Err(job_not_found(&id));
    };
    let cursor = q.cursor.as_deref().filter(|c| !c.is_empty());
    let page = state
        .store
        .executions_list_for_job(tenant, &id, limit, cursor)
        .await?;
    let routable = waiting::routable(state.store.as_ref()).await?;
    let redactor = shown::redactor(&state, &caller, &job);
    Ok(Json(ExecutionPage {
        items: page
            .items
            .into_iter()
            .map(|e| shown::execution(redactor.as_ref(), waiting::view(&job, e, &routable)))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// List the tenant's executions across its jobs, newest trigger first,
/// filtered by state, job, handler, worker and due time.
#[utoipa::path(
    get, path = "/openapi/executions", tag = "executions",
    params(ListExecutionsQuery),
    responses(
        (status = 200, description = "A page of executions", body = ExecutionPage),
        (status = 422, description = "Unknown status, bad time, empty range or bad limit", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_executions(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListExecutionsQuery>,
) -> Result<Json<ExecutionPage>, ApiError> {
    let (from, to) = validate::time_range(q.from.as_deref(), q.to.as_deref())?;
    let text = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let filter = ExecFilter {
        statuses: validate::exec_statuses(q.status.as_deref())?,
        job_id: text(q.job_id),
        handler: text(q.handler),
        worker_id: text(q.worker_id),
        from,
        to,
        limit: validate::page_limit(q.limit.as_deref())?,
        cursor: q.cursor.filter(|c| !c.is_empty()),
    };
    let tenant = &caller.tenant;
    let page = state.store.executions_list(tenant, &filter).await?;
    let routable = waiting::routable(state.store.as_ref()).await?;
    // The page's jobs in one read (a page holds up to 500 executions, of
    // as many jobs), each with what hides its sensitive values from a read
    // key.
    let mut ids: Vec<&str> = page.items.iter().map(|e| e.job_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let jobs: HashMap<String, _> = state
        .store
        .jobs_get_many(tenant, &ids)
        .await?
        .into_iter()
        .map(|job| {
            let redactor = shown::redactor(&state, &caller, &job);
            (job.id.clone(), (job, redactor))
        })
        .collect();
    let mut items = Vec::with_capacity(page.items.len());
    for e in page.items {
        items.push(match jobs.get(&e.job_id) {
            Some((job, redactor)) => {
                shown::execution(redactor.as_ref(), waiting::view(job, e, &routable))
            }
            None => e.into(),
        });
    }
    Ok(Json(ExecutionPage {
        items,
        next_cursor: page.next_cursor,
    }))
}

/// Read the log lines an execution's handler wrote, oldest first.
#[utoipa::path(
    get, path = "/openapi/executions/{id}/logs", tag = "executions",
    params(("id" = String, Path, description = "Execution id"), PageQuery),
    responses(
        (status = 200, description = "A page of log lines, oldest first", body = LogPage),
        (status = 404, description = "No such execution", body = ErrorBody),
        (status = 422, description = "Bad limit", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn execution_logs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<LogPage>, ApiError> {
    let limit = validate::page_limit(q.limit.as_deref())?;
    // The tenant check: the log is read by execution id once the execution
    // is known to belong to the caller's tenant.
    let Some(execution) = state.store.execution_get(&caller.tenant, &id).await? else {
        return Err(execution_not_found(&id));
    };
    let redactor = shown::redactor_of(&state, &caller, &execution.job_id).await?;
    let cursor = q.cursor.as_deref().filter(|c| !c.is_empty());
    let page = state.store.logs_page(&id, cursor, limit).await?;
    Ok(Json(LogPage {
        items: page
            .items
            .into_iter()
            .map(|l| shown::log_line(redactor.as_ref(), l.into()))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// Get an execution with every transition it went through.
#[utoipa::path(
    get, path = "/openapi/executions/{id}", tag = "executions",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The execution and its history", body = ExecutionDetail),
        (status = 404, description = "No such execution", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn get_execution(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ExecutionDetail>, ApiError> {
    let tenant = &caller.tenant;
    let execution = state
        .store
        .execution_get(tenant, &id)
        .await?
        .ok_or_else(|| execution_not_found(&id))?;
    let events = state.store.execution_events(tenant, &id).await?;
    let (view, redactor) = match state.store.job_get(tenant, &execution.job_id).await? {
        Some(job) => {
            let routable = waiting::routable(state.store.as_ref()).await?;
            let redactor = shown::redactor(&state, &caller, &job);
            (waiting::view(&job, execution, &routable), redactor)
        }
        None => (execution.into(), None),
    };
    Ok(Json(ExecutionDetail {
        execution: shown::execution(redactor.as_ref(), view),
        events: events
            .into_iter()
            .map(|e| shown::event(redactor.as_ref(), e.into()))
            .collect(),
    }))
}
