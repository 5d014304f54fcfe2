//! `GET /healthz` (the process is up), `GET /readyz` (its dependencies
//! answer) and `GET /metrics` (Prometheus text).

use crate::AppState;
use crate::dto::{HealthBody, ReadyBody};
use crate::error::{ApiError, ErrorBody, ErrorDetail};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use futures::future::join_all;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// A dependency slower than this counts as down: a probe must answer quickly.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Liveness: answers while the process serves requests.
#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = HealthBody))
)]
pub(crate) async fn healthz() -> Json<HealthBody> {
    Json(HealthBody {
        status: "ok".into(),
    })
}

async fn probe(fut: impl Future<Output = Result<(), String>>) -> Result<(), String> {
    tokio::time::timeout(CHECK_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {CHECK_TIMEOUT:?}")))
}

/// Readiness: the database and every registered dependency answer.
#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = ReadyBody),
        (status = 503, description = "A dependency is down; `error` names it", body = ReadyBody),
    )
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<ReadyBody>) {
    let database = probe(async { state.store.ping().await.map_err(|e| e.to_string()) });
    let others = join_all(
        state
            .ready_checks
            .iter()
            .map(|c| async move { (c.name().to_string(), probe(c.check()).await) }),
    );
    let (database, others) = tokio::join!(database, others);
    let results = std::iter::once(("database".to_string(), database)).chain(others);

    let mut checks = BTreeMap::new();
    let mut failing = Vec::new();
    for (name, result) in results {
        let text = match result {
            Ok(()) => "ok".to_string(),
            Err(e) => {
                tracing::warn!(dependency = %name, error = %e, "readiness check failed");
                failing.push(format!("{name} ({e})"));
                e
            }
        };
        checks.insert(name, text);
    }
    if failing.is_empty() {
        let body = ReadyBody {
            status: "ready".into(),
            checks,
            error: None,
        };
        return (StatusCode::OK, Json(body));
    }
    let error = ErrorDetail {
        code: "unavailable".into(),
        message: format!("not ready: {}", failing.join(", ")),
        field: None,
        node: None,
        reason: None,
    };
    let body = ReadyBody {
        status: "unavailable".into(),
        checks,
        error: Some(error),
    };
    (StatusCode::SERVICE_UNAVAILABLE, Json(body))
}

/// Prometheus metrics of this process.
#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain"),
        (status = 404, description = "No metrics exporter is installed", body = ErrorBody),
    )
)]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    match &state.prometheus {
        Some(handle) => (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            handle.render(),
        )
            .into_response(),
        None => {
            ApiError::NotFound("metrics are not enabled in this process".into()).into_response()
        }
    }
}
