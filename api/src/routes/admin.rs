//! The admin API: tenants and their callback secrets, API keys, and the
//! audit trail. The auth middleware lets only operator keys create and list
//! tenants, and admin keys (and operators) reach the rest; here an admin is
//! narrowed to its own tenant, another tenant answering 404 as an unknown
//! one does ([`Caller::manages`]).

use crate::AppState;
use crate::auth::{Caller, keys};
use crate::dto::{
    AuditPage, AuditQuery, CreateKeyRequest, CreateTenantRequest, CreatedKey, CreatedTenant,
    KeyList, KeyView, KeysQuery, RotateSecretRequest, RotatedSecret, TenantLimitsRequest,
    TenantList, TenantView,
};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::validate;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use kairos_core::tenant::{Role, Tenant, valid_tenant_id};
use kairos_core::time::{now_ms, to_rfc3339};

/// Default grace period of a callback secret rotation.
const DEFAULT_GRACE_SECS: u64 = 86_400;
/// Longest grace period of a rotation.
const MAX_GRACE_SECS: u64 = 30 * 86_400;

fn tenant_not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no tenant with id {id:?}"))
}

/// Create a tenant with a fresh callback signing secret.
#[utoipa::path(
    post, path = "/openapi/tenants", tag = "admin",
    request_body(content = CreateTenantRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; the callback secret is shown this once", body = CreatedTenant),
        (status = 409, description = "A tenant with this id exists", body = ErrorBody),
        (status = 422, description = "Invalid id or limit", body = ErrorBody),
    )
)]
pub(crate) async fn create_tenant(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateTenantRequest>,
) -> Result<(StatusCode, Json<CreatedTenant>), ApiError> {
    if !valid_tenant_id(&req.tenant_id) {
        return Err(ApiError::invalid(
            "tenantId",
            "tenantId must be 1–64 characters of a-z, 0-9, '-' and '_'",
        ));
    }
    let limits = validate::tenant_limits(&TenantLimitsRequest {
        create_rate_per_sec: req.create_rate_per_sec,
        create_burst: req.create_burst,
        max_live_jobs: req.max_live_jobs,
        action_rate_per_sec: req.action_rate_per_sec,
        action_burst: req.action_burst,
    })?;
    let secret = keys::new_callback_secret();
    let tenant = Tenant {
        id: req.tenant_id.clone(),
        callback_secret: Some(secret.clone()),
        previous_secret: None,
        previous_valid_until: None,
        limits,
        created_at: now_ms(),
    };
    if !state.store.tenant_create(&tenant).await? {
        return Err(ApiError::AlreadyExists(format!(
            "a tenant with id {:?} already exists",
            tenant.id
        )));
    }
    state
        .audit(&caller, &tenant.id, "tenant.create", &tenant.id)
        .await;
    Ok((
        StatusCode::CREATED,
        Json(CreatedTenant {
            tenant: TenantView::from(&tenant),
            callback_secret: secret,
        }),
    ))
}

/// List every tenant.
#[utoipa::path(
    get, path = "/openapi/tenants", tag = "admin",
    responses((status = 200, description = "Every tenant", body = TenantList))
)]
pub(crate) async fn list_tenants(
    State(state): State<AppState>,
) -> Result<Json<TenantList>, ApiError> {
    let tenants = state.store.tenants_list().await?;
    Ok(Json(TenantList {
        items: tenants.iter().map(TenantView::from).collect(),
    }))
}

/// Rotate a tenant's callback secret.
///
/// Callbacks are signed with the new secret and, until the grace period
/// ends, also with the old one (two `v1=` in `Kairos-Signature`), so
/// receivers can switch secrets at their own pace.
#[utoipa::path(
    post, path = "/openapi/tenants/{id}/callback-secret", tag = "admin",
    params(("id" = String, Path, description = "Tenant id")),
    request_body(content = RotateSecretRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Rotated; the new secret is shown this once", body = RotatedSecret),
        (status = 404, description = "No such tenant, or (admin key) not the key's own", body = ErrorBody),
        (status = 422, description = "Grace period out of range", body = ErrorBody),
    )
)]
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<RotateSecretRequest>,
) -> Result<Json<RotatedSecret>, ApiError> {
    if !caller.manages(&id) {
        return Err(tenant_not_found(&id));
    }
    let grace = req.grace_seconds.unwrap_or(DEFAULT_GRACE_SECS);
    if grace > MAX_GRACE_SECS {
        return Err(ApiError::invalid(
            "graceSeconds",
            format!("graceSeconds must be at most {MAX_GRACE_SECS}"),
        ));
    }
    let now = now_ms();
    let until = now + i64::try_from(grace * 1000).unwrap_or(i64::MAX / 2);
    let secret = keys::new_callback_secret();
    let tenant = state
        .store
        .tenant_rotate_secret(&id, &secret, until, now)
        .await?
        .ok_or_else(|| tenant_not_found(&id))?;
    state
        .audit(&caller, &tenant.id, "tenant.rotate_secret", &tenant.id)
        .await;
    Ok(Json(RotatedSecret {
        tenant_id: tenant.id,
        callback_secret: secret,
        previous_secret_valid_until: to_rfc3339(until),
    }))
}

/// Create an API key for a tenant.
#[utoipa::path(
    post, path = "/openapi/keys", tag = "admin",
    request_body(content = CreateKeyRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created; `keyToken` is shown this once", body = CreatedKey),
        (status = 403, description = "A role stronger than the caller's own", body = ErrorBody),
        (status = 404, description = "No such tenant, or (admin key) not the key's own", body = ErrorBody),
        (status = 422, description = "Invalid role or expiry", body = ErrorBody),
    )
)]
pub(crate) async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateKeyRequest>,
) -> Result<(StatusCode, Json<CreatedKey>), ApiError> {
    let role = Role::parse(&req.role)
        .ok_or_else(|| ApiError::invalid("role", "role must be operator, admin, write or read"))?;
    if !caller.manages(&req.tenant_id) {
        return Err(tenant_not_found(&req.tenant_id));
    }
    caller.may_handle_role(role)?;
    let now = now_ms();
    let expires_at = validate::time_field("expiresAt", req.expires_at.as_deref())?;
    if expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::invalid(
            "expiresAt",
            "expiresAt must be in the future",
        ));
    }
    let issued = keys::issue(&req.tenant_id, role, req.name, expires_at, now);
    if !state.store.api_key_create(&issued.key).await? {
        return Err(tenant_not_found(&req.tenant_id));
    }
    // Its prefix may have been looked up (and remembered unknown) before.
    state.auth.keys.evict(&issued.key.prefix);
    state
        .audit(&caller, &req.tenant_id, "key.create", &issued.key.prefix)
        .await;
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: KeyView::from(&issued.key),
            key_token: issued.token,
        }),
    ))
}

/// List API keys (never their secrets): an operator's of every tenant or
/// of `tenant`, an admin's of its own tenant.
#[utoipa::path(
    get, path = "/openapi/keys", tag = "admin",
    params(KeysQuery),
    responses(
        (status = 200, description = "Keys, newest first", body = KeyList),
        (status = 404, description = "(admin key) `tenant` is not the key's own", body = ErrorBody),
    )
)]
pub(crate) async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<KeysQuery>,
) -> Result<Json<KeyList>, ApiError> {
    let tenant = caller.managed_scope(q.tenant.as_deref(), tenant_not_found)?;
    let keys = state.store.api_keys_list(tenant.as_deref()).await?;
    Ok(Json(KeyList {
        items: keys.iter().map(KeyView::from).collect(),
    }))
}

/// Revoke an API key: this API instance refuses it at once, every other one
/// within its key cache time (half a second by default).
#[utoipa::path(
    delete, path = "/openapi/keys/{prefix}", tag = "admin",
    params(("prefix" = String, Path, description = "Key prefix")),
    responses(
        (status = 200, description = "Revoked (or already revoked)", body = KeyView),
        (status = 403, description = "(admin key) an operator key", body = ErrorBody),
        (status = 404, description = "No such key, or (admin key) another tenant's", body = ErrorBody),
    )
)]
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(prefix): ApiPath<String>,
) -> Result<Json<KeyView>, ApiError> {
    let key_not_found = || ApiError::NotFound(format!("no API key with prefix {prefix:?}"));
    let scope = caller.managed_scope(None, |_| key_not_found())?;
    // An admin may not revoke its tenant's operator key: read it first.
    if scope.is_some() {
        let stored = state.store.api_key_get(&prefix).await?;
        match stored {
            Some(k) if caller.manages(&k.tenant) => caller.may_handle_role(k.role)?,
            _ => return Err(key_not_found()),
        }
    }
    let key = state
        .store
        .api_key_revoke(&prefix, scope.as_deref(), now_ms())
        .await?
        .ok_or_else(key_not_found)?;
    state.auth.keys.evict(&key.prefix);
    state
        .audit(&caller, &key.tenant, "key.revoke", &key.prefix)
        .await;
    Ok(Json(KeyView::from(&key)))
}

/// The audit trail, newest first: an operator's of every tenant or of
/// `tenant`, an admin's of its own tenant.
#[utoipa::path(
    get, path = "/openapi/audit", tag = "admin",
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of entries", body = AuditPage),
        (status = 404, description = "(admin key) `tenant` is not the key's own", body = ErrorBody),
        (status = 422, description = "Bad limit", body = ErrorBody),
    )
)]
pub(crate) async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    let limit = validate::page_limit(q.limit.as_deref())?;
    let cursor = q.cursor.as_deref().filter(|c| !c.is_empty());
    let tenant = caller.managed_scope(q.tenant.as_deref(), tenant_not_found)?;
    let page = state
        .store
        .audit_list(tenant.as_deref(), limit, cursor)
        .await?;
    Ok(Json(AuditPage {
        items: page.items.into_iter().map(Into::into).collect(),
        next_cursor: page.next_cursor,
    }))
}
