//! `GET /openapi/executions/{id}/callbacks` and
//! `POST /openapi/executions/{id}/callbacks/redeliver`.

use super::execution_not_found;
use crate::AppState;
use crate::auth::{Caller, limits};
use crate::dto::{CallbackList, CallbackView};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiPath;
use crate::shown;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kairos_core::callback::CallbackState;
use kairos_core::execution::Execution;
use kairos_core::time::now_ms;

/// The execution must exist: an empty list would not tell an unknown
/// execution from one whose job has no callback URL.
async fn require_execution(
    state: &AppState,
    tenant: &str,
    id: &str,
) -> Result<Execution, ApiError> {
    state
        .store
        .execution_get(tenant, id)
        .await?
        .ok_or_else(|| execution_not_found(id))
}

/// List an execution's callbacks with every delivery attempt.
#[utoipa::path(
    get, path = "/openapi/executions/{id}/callbacks", tag = "callbacks",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Its callbacks, oldest first; empty when its job has no callback URL or it has not finished", body = CallbackList),
        (status = 404, description = "No such execution", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_callbacks(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CallbackList>, ApiError> {
    let execution = require_execution(&state, &caller.tenant, &id).await?;
    let found = state
        .store
        .callbacks_for_execution(&caller.tenant, &id)
        .await?;
    let redactor = shown::redactor_of(&state, &caller, &execution.job_id).await?;
    Ok(Json(CallbackList {
        items: found
            .into_iter()
            .map(|c| shown::callback(redactor.as_ref(), c.into()))
            .collect(),
    }))
}

/// Send an execution's outcome again as a new delivery.
///
/// Queues a new delivery (new delivery id, same body) of the execution's
/// latest callback when that one is `delivered` or `dead`; the relay sends it
/// like any other. Counts against the key's action rate.
#[utoipa::path(
    post, path = "/openapi/executions/{id}/callbacks/redeliver", tag = "callbacks",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 202, description = "A new delivery was queued", body = CallbackView),
        (status = 404, description = "No such execution", body = ErrorBody),
        (status = 409, description = "No callback to redeliver, or the latest is still pending", body = ErrorBody),
        (status = 429, description = "The key's action rate is used up; see Retry-After", body = ErrorBody),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn redeliver_callback(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<CallbackView>), ApiError> {
    limits::admit_action(&state, &caller)?;
    require_execution(&state, &caller.tenant, &id).await?;
    let tenant = &caller.tenant;
    let delivery_id = uuid::Uuid::now_v7().to_string();
    match state
        .store
        .callback_redeliver(tenant, &id, &delivery_id, now_ms())
        .await?
    {
        Some(fresh) => {
            state
                .audit(&caller, tenant, "callback.redeliver", &id)
                .await;
            Ok((
                StatusCode::ACCEPTED,
                Json(CallbackView::from((fresh, Vec::new()))),
            ))
        }
        None => Err(refusal(&state, tenant, &id).await?),
    }
}

/// Why a redelivery was refused; the store only says that it was.
async fn refusal(state: &AppState, tenant: &str, id: &str) -> Result<ApiError, ApiError> {
    let found = state.store.callbacks_for_execution(tenant, id).await?;
    let message = match found.last() {
        None => format!(
            "execution {id} has no callback to redeliver: its job has no callbackUrl \
             or the execution has not finished"
        ),
        Some((latest, _)) if latest.state == CallbackState::Pending => format!(
            "the latest callback of execution {id} (delivery {}) is still pending; \
             only a delivered or dead callback can be redelivered",
            latest.id
        ),
        // The relay finished the pending delivery between the two reads.
        Some((latest, _)) => format!(
            "the latest callback of execution {id} (delivery {}) changed while it was \
             being redelivered; it is now {}, retry",
            latest.id,
            latest.state.as_str()
        ),
    };
    Ok(ApiError::InvalidState(message))
}
