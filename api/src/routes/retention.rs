//! `GET`/`PUT /openapi/tenants/{id}/retention`: an operator reads or
//! replaces a tenant's retention overrides (operator keys only, enforced by
//! the auth middleware), as `kairos tenants set-retention` does on the
//! database. The dispatcher's purge applies them from its next pass.

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{TenantRetentionRequest, TenantRetentionView};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use crate::validate;
use axum::Json;
use axum::extract::State;
use kairos_core::time::now_ms;

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no tenant with id {id:?}"))
}

/// A tenant's retention overrides.
#[utoipa::path(
    get, path = "/openapi/tenants/{id}/retention", tag = "admin",
    params(("id" = String, Path, description = "Tenant id")),
    responses(
        (status = 200, description = "The overrides (null: the deployment's period)", body = TenantRetentionView),
        (status = 404, description = "No such tenant", body = ErrorBody),
    )
)]
pub(crate) async fn get_tenant_retention(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<TenantRetentionView>, ApiError> {
    let r = state
        .store
        .tenant_retention(&id)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(TenantRetentionView::new(&id, &r)))
}

/// Replace a tenant's retention overrides.
///
/// Every override is replaced: one absent (or `null`) goes back to the
/// deployment's period (`KAIROS_RETAIN_*`). Durations are `s`, `m`, `h` or
/// `d`, from `1m` to `36500d`.
#[utoipa::path(
    put, path = "/openapi/tenants/{id}/retention", tag = "admin",
    params(("id" = String, Path, description = "Tenant id")),
    request_body(content = TenantRetentionRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The tenant's new overrides", body = TenantRetentionView),
        (status = 404, description = "No such tenant", body = ErrorBody),
        (status = 422, description = "A period that is not a duration, or out of range", body = ErrorBody),
    )
)]
pub(crate) async fn set_tenant_retention(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<TenantRetentionRequest>,
) -> Result<Json<TenantRetentionView>, ApiError> {
    let retention = validate::tenant_retention(&req)?;
    if !state
        .store
        .tenant_set_retention(&id, &retention, now_ms())
        .await?
    {
        return Err(not_found(&id));
    }
    state.audit(&caller, &id, "tenant.set_retention", &id).await;
    Ok(Json(TenantRetentionView::new(&id, &retention)))
}
