//! The routes, one file per resource, collected into an [`OpenApiRouter`] so
//! every handler is documented by its own annotation.

mod admin;
mod batch;
mod callbacks;
mod concurrency;
mod control;
mod executions;
mod followups;
mod health;
mod jobs;
mod limits;
mod preview;
mod retention;
mod update;
mod workers;
mod workflow_control;
mod workflows;

use crate::AppState;
use crate::error::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Every documented route.
pub(crate) fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .routes(routes!(jobs::create_job, jobs::list_jobs))
        .routes(routes!(batch::create_jobs))
        .routes(routes!(preview::preview_schedule))
        .routes(routes!(
            jobs::get_job,
            control::cancel_job,
            update::update_job
        ))
        .routes(routes!(control::pause_job))
        .routes(routes!(control::resume_job))
        .routes(routes!(control::trigger_job))
        .routes(routes!(followups::get_followups, followups::set_followups))
        .routes(routes!(executions::list_job_executions))
        .routes(routes!(executions::list_executions))
        .routes(routes!(executions::get_execution))
        .routes(routes!(executions::execution_logs))
        .routes(routes!(callbacks::list_callbacks))
        .routes(routes!(callbacks::redeliver_callback))
        .routes(routes!(
            workflows::create_workflow,
            workflows::list_workflows
        ))
        .routes(routes!(
            workflows::get_workflow,
            workflows::delete_workflow,
            workflow_control::update_workflow
        ))
        .routes(routes!(workflow_control::pause_workflow))
        .routes(routes!(workflow_control::resume_workflow))
        .routes(routes!(workflows::trigger_workflow))
        .routes(routes!(workflows::list_runs))
        .routes(routes!(workflows::get_run))
        .routes(routes!(workflows::cancel_run))
        .routes(routes!(workers::list_workers))
        .routes(routes!(concurrency::list_limits))
        .routes(routes!(concurrency::set_limit, concurrency::delete_limit))
        .routes(routes!(admin::create_tenant, admin::list_tenants))
        .routes(routes!(admin::rotate_secret))
        .routes(routes!(limits::set_tenant_limits))
        .routes(routes!(
            retention::get_tenant_retention,
            retention::set_tenant_retention
        ))
        .routes(routes!(admin::create_key, admin::list_keys))
        .routes(routes!(admin::revoke_key))
        .routes(routes!(admin::list_audit))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
}

/// Fallback for paths no route matches.
pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

/// Fallback for a known path with a method it does not serve.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The 404 of a job id that names no job of the tenant.
fn job_not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no job with id {id:?}"))
}

/// The 404 of an execution id that names no execution of the tenant.
fn execution_not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no execution with id {id:?}"))
}
