//! `/openapi/limits`: operators' concurrency limits per handler and per
//! tenant (operator keys only, enforced by the auth middleware). A job's own
//! limit is its `maxConcurrency`.

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{ConcurrencyLimitList, ConcurrencyLimitRequest, ConcurrencyLimitView};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kairos_core::concurrency::{Limit, Scope, check_limit, check_rate};
use kairos_core::time::now_ms;

/// The longest handler name or tenant id a limit names.
const MAX_NAME_CHARS: usize = 255;

/// List the concurrency limits with the executions running under each.
#[utoipa::path(
    get, path = "/openapi/limits", tag = "limits",
    responses(
        (status = 200, description = "Every limit", body = ConcurrencyLimitList),
        (status = 503, description = "Database unavailable", body = ErrorBody),
    )
)]
pub(crate) async fn list_limits(
    State(state): State<AppState>,
) -> Result<Json<ConcurrencyLimitList>, ApiError> {
    let items = state.store.limits_list().await?;
    Ok(Json(ConcurrencyLimitList {
        items: items.into_iter().map(ConcurrencyLimitView::from).collect(),
    }))
}

/// Set a concurrency limit on a handler or a tenant.
///
/// At most `maxRunning` executions of the handler (across tenants) or of
/// the tenant's jobs are dispatched or running at once, whichever
/// dispatcher sends them; a trigger over the limit waits, `pending`, with
/// `waitingFor.reason` `concurrency`, and goes when one ends. Executions
/// already running count from the moment the limit is set. With
/// `ratePerSec`, at most that many are dispatched a second (bursts of a
/// second's worth); one over it waits with `waitingFor.reason` `rate`.
/// Replaces the limit's previous values; applies from the next dispatch.
#[utoipa::path(
    put, path = "/openapi/limits/{scope}/{name}", tag = "limits",
    params(
        ("scope" = String, Path, description = "`handler` or `tenant`"),
        ("name" = String, Path, description = "The handler's name or the tenant's id"),
    ),
    request_body(content = ConcurrencyLimitRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The limit as set", body = ConcurrencyLimitView),
        (status = 422, description = "Unknown scope, bad name or a limit out of range", body = ErrorBody),
    )
)]
pub(crate) async fn set_limit(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((scope, name)): ApiPath<(String, String)>,
    ApiJson(req): ApiJson<ConcurrencyLimitRequest>,
) -> Result<Json<ConcurrencyLimitView>, ApiError> {
    let max_running = req
        .max_running
        .map(|n| {
            check_limit(n)
                .map_err(|e| ApiError::invalid("maxRunning", format!("maxRunning {e}, got {n}")))
        })
        .transpose()?;
    let rate_per_sec = req
        .rate_per_sec
        .map(|r| {
            check_rate(r)
                .map_err(|e| ApiError::invalid("ratePerSec", format!("ratePerSec {e}, got {r}")))
        })
        .transpose()?;
    if max_running.is_none() && rate_per_sec.is_none() {
        return Err(ApiError::invalid(
            "maxRunning",
            "give maxRunning, ratePerSec or both (DELETE removes a limit)",
        ));
    }
    let limit = Limit {
        scope: scope_of(&scope)?,
        name: name_of(&name)?,
        max_running,
        rate_per_sec,
    };
    state.store.limit_set(&limit, now_ms()).await?;
    state
        .audit(&caller, &caller.tenant, "limit.set", limit.key().as_str())
        .await;
    let running = state.store.concurrency_in_use(&limit.key()).await?;
    Ok(Json(ConcurrencyLimitView::from(
        kairos_core::store::LimitUsage { limit, running },
    )))
}

/// Remove a concurrency limit.
#[utoipa::path(
    delete, path = "/openapi/limits/{scope}/{name}", tag = "limits",
    params(
        ("scope" = String, Path, description = "`handler` or `tenant`"),
        ("name" = String, Path, description = "The handler's name or the tenant's id"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No such limit", body = ErrorBody),
        (status = 422, description = "Unknown scope", body = ErrorBody),
    )
)]
pub(crate) async fn delete_limit(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((scope, name)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let scope = scope_of(&scope)?;
    if !state.store.limit_delete(scope, &name).await? {
        return Err(ApiError::NotFound(format!(
            "no {} limit named {name:?}",
            scope.as_str()
        )));
    }
    let key = kairos_core::concurrency::ScopeKey::new(scope, &name);
    state
        .audit(&caller, &caller.tenant, "limit.delete", key.as_str())
        .await;
    Ok(StatusCode::NO_CONTENT)
}

/// The scope a path names: `handler` or `tenant`.
fn scope_of(raw: &str) -> Result<Scope, ApiError> {
    Scope::parse(raw)
        .filter(|s| Scope::OPERATOR.contains(s))
        .ok_or_else(|| {
            ApiError::invalid(
                "scope",
                format!("scope must be handler or tenant (a job's limit is its maxConcurrency), got {raw:?}"),
            )
        })
}

/// The handler name or tenant id a path names: 1–255 characters.
fn name_of(raw: &str) -> Result<String, ApiError> {
    let n = raw.chars().count();
    if n == 0 || n > MAX_NAME_CHARS {
        return Err(ApiError::invalid(
            "name",
            format!("name must be 1–{MAX_NAME_CHARS} characters, got {n}"),
        ));
    }
    Ok(raw.to_string())
}
