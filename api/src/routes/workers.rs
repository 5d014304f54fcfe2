//! `GET /openapi/workers`.

use crate::AppState;
use crate::dto::{WorkerList, WorkerView};
use crate::error::{ApiError, ErrorBody};
use axum::Json;
use axum::extract::State;

/// List every known worker with the figures of its latest heartbeat.
#[utoipa::path(
    get, path = "/openapi/workers", tag = "workers",
    responses(
        (status = 200, description = "All workers", body = WorkerList),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_workers(
    State(state): State<AppState>,
) -> Result<Json<WorkerList>, ApiError> {
    let workers = state.store.workers_list().await?;
    Ok(Json(WorkerList {
        items: workers.into_iter().map(WorkerView::from).collect(),
    }))
}
