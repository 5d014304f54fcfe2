//! Child jobs (issue 34, part 3): `GET/PUT /openapi/jobs/{id}/followups`,
//! the jobs a job's executions trigger when they end.

use super::job_not_found;
use crate::AppState;
use crate::auth::Caller;
use crate::dto::FollowUpsBody;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use axum::Json;
use axum::extract::State;
use kairos_core::time::now_ms;
use kairos_core::workflow::followup::{FollowUps, MAX_FOLLOWUPS, SetFollowUps};

/// A job's follow-up jobs.
#[utoipa::path(
    get, path = "/openapi/jobs/{id}/followups", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses(
        (status = 200, description = "Its follow-ups", body = FollowUpsBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub(crate) async fn get_followups(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<FollowUpsBody>, ApiError> {
    let f = state
        .store
        .job_followups_get(&caller.tenant, &id)
        .await?
        .ok_or_else(|| job_not_found(&id))?;
    Ok(Json(f.into()))
}

/// Set a job's follow-up jobs (child jobs): each of its executions that
/// succeeds triggers the `onSuccess` jobs, each that fails after its
/// retries (failed, timed out, lost) the `onFailure` ones, as a manual
/// trigger would (paused and cancelled children are not triggered).
/// Replaces what was set; empty lists clear it. A cycle is refused.
#[utoipa::path(
    put, path = "/openapi/jobs/{id}/followups", tag = "control",
    params(("id" = String, Path, description = "Job id")),
    request_body(content = FollowUpsBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored", body = FollowUpsBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 422, description = "A child is no job of the tenant, there are too many, or they would form a cycle", body = ErrorBody),
    )
)]
pub(crate) async fn set_followups(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<FollowUpsBody>,
) -> Result<Json<FollowUpsBody>, ApiError> {
    for (field, ids) in [
        ("onSuccess", &body.on_success),
        ("onFailure", &body.on_failure),
    ] {
        if ids.len() > MAX_FOLLOWUPS {
            return Err(ApiError::invalid(
                field,
                format!(
                    "{field} names {} jobs; the limit is {MAX_FOLLOWUPS}",
                    ids.len()
                ),
            ));
        }
    }
    let f = FollowUps {
        on_success: body.on_success,
        on_failure: body.on_failure,
    };
    let field_of = |child: &str| {
        if f.on_success.iter().any(|c| c == child) {
            "onSuccess"
        } else {
            "onFailure"
        }
    };
    match state
        .store
        .job_followups_set(&caller.tenant, &id, &f, now_ms())
        .await?
    {
        SetFollowUps::Done(set) => {
            state
                .audit(&caller, &caller.tenant, "job.followups", &id)
                .await;
            Ok(Json(set.into()))
        }
        SetFollowUps::NotFound => Err(job_not_found(&id)),
        SetFollowUps::UnknownChild(c) => Err(ApiError::invalid(
            field_of(&c),
            format!("{c:?} is no job of this tenant"),
        )),
        SetFollowUps::Cycle(at) => Err(ApiError::invalid(
            "onSuccess",
            format!("these follow-ups would form a cycle through job {at:?}"),
        )),
    }
}
