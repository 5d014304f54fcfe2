//! `PUT /openapi/tenants/{id}/limits`: an operator replaces a tenant's limit
//! overrides (admin keys only, enforced by the auth middleware), as
//! `kairos tenants set-limits` does on the database.

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{TenantLimitsRequest, TenantView};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath};
use crate::validate;
use axum::Json;
use axum::extract::State;
use kairos_core::time::now_ms;

/// Replace a tenant's limits.
///
/// Every limit is replaced: one absent (or `null`) goes back to the server
/// default. This instance applies them at once, every other one within its
/// key cache time (half a second by default).
#[utoipa::path(
    put, path = "/openapi/tenants/{id}/limits", tag = "admin",
    params(("id" = String, Path, description = "Tenant id")),
    request_body(content = TenantLimitsRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The tenant with its new limits", body = TenantView),
        (status = 404, description = "No such tenant", body = ErrorBody),
        (status = 422, description = "A limit out of range", body = ErrorBody),
    )
)]
pub(crate) async fn set_tenant_limits(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<TenantLimitsRequest>,
) -> Result<Json<TenantView>, ApiError> {
    let limits = validate::tenant_limits(&req)?;
    let not_found = || ApiError::NotFound(format!("no tenant with id {id:?}"));
    if !state
        .store
        .tenant_set_limits(&id, &limits, now_ms())
        .await?
    {
        return Err(not_found());
    }
    // Keys carry their tenant's limits in the cache.
    state.auth.keys.evict_tenant(&id);
    state.audit(&caller, &id, "tenant.set_limits", &id).await;
    let tenant = state.store.tenant_get(&id).await?.ok_or_else(not_found)?;
    Ok(Json(TenantView::from(&tenant)))
}
