//! Bodies of the admin API: tenants, API keys and the audit trail.

use kairos_core::tenant::{ApiKey, AuditEntry, Tenant};
use kairos_core::time::{Millis, to_rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

fn time(at: Millis) -> String {
    to_rfc3339(at)
}

/// Body of `POST /openapi/tenants`. Absent limits take the server defaults.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateTenantRequest {
    /// 1–64 of `a-z`, `0-9`, `-`, `_`.
    #[schema(example = "acme")]
    pub tenant_id: String,
    /// Job creates per second per key.
    pub create_rate_per_sec: Option<f64>,
    /// Creates a key may burst before the rate applies.
    pub create_burst: Option<u32>,
    /// Most scheduled, running or paused jobs the tenant may hold.
    pub max_live_jobs: Option<u64>,
    /// Triggers, resumes and redeliveries per second per key.
    pub action_rate_per_sec: Option<f64>,
    /// Such actions a key may burst before the rate applies.
    pub action_burst: Option<u32>,
}

/// Body of `PUT /openapi/tenants/{id}/limits`: the tenant's limits, all
/// replaced; an absent (or `null`) limit goes back to the server default.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantLimitsRequest {
    /// Job creates per second per key.
    pub create_rate_per_sec: Option<f64>,
    /// Creates a key may burst before the rate applies; also the largest batch.
    pub create_burst: Option<u32>,
    /// Most scheduled, running or paused jobs the tenant may hold.
    pub max_live_jobs: Option<u64>,
    /// Triggers, resumes and redeliveries per second per key.
    pub action_rate_per_sec: Option<f64>,
    /// Such actions a key may burst before the rate applies.
    pub action_burst: Option<u32>,
}

/// A tenant (its callback secret is shown only when created or rotated).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    /// Id.
    pub tenant_id: String,
    /// Create rate override (`null`: server default).
    pub create_rate_per_sec: Option<f64>,
    /// Burst override (`null`: server default).
    pub create_burst: Option<u32>,
    /// Live-jobs cap override (`null`: server default).
    pub max_live_jobs: Option<u64>,
    /// Action rate override (`null`: server default).
    pub action_rate_per_sec: Option<f64>,
    /// Action burst override (`null`: server default).
    pub action_burst: Option<u32>,
    /// End of the current secret rotation's grace period, if one is running.
    pub previous_secret_valid_until: Option<String>,
    /// Creation time.
    pub created_at: String,
}

impl From<&Tenant> for TenantView {
    fn from(t: &Tenant) -> Self {
        TenantView {
            tenant_id: t.id.clone(),
            create_rate_per_sec: t.limits.create_rate_per_sec,
            create_burst: t.limits.create_burst,
            max_live_jobs: t.limits.max_live_jobs,
            action_rate_per_sec: t.limits.action_rate_per_sec,
            action_burst: t.limits.action_burst,
            previous_secret_valid_until: t.previous_valid_until.map(time),
            created_at: time(t.created_at),
        }
    }
}

/// A new tenant with its callback signing secret (shown this once).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedTenant {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: TenantView,
    /// Secret its callbacks are signed with.
    pub callback_secret: String,
}

/// `{"items": [tenant…]}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TenantList {
    /// Every tenant, by id.
    pub items: Vec<TenantView>,
}

/// Body of `POST /openapi/tenants/{id}/callback-secret`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RotateSecretRequest {
    /// How long the old secret keeps signing beside the new one (default
    /// 86 400 s = 24 h, at most 30 days).
    #[schema(minimum = 0, maximum = 2_592_000)]
    pub grace_seconds: Option<u64>,
}

/// The new secret after a rotation.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    /// Tenant.
    pub tenant_id: String,
    /// The new secret (shown this once).
    pub callback_secret: String,
    /// Until then callbacks carry a second `v1` made with the old secret.
    pub previous_secret_valid_until: String,
}

/// Body of `POST /openapi/keys`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateKeyRequest {
    /// Tenant the key acts for.
    pub tenant_id: String,
    /// `operator`, `admin`, `write` or `read`; at most the caller's own role.
    #[schema(example = "write")]
    pub role: String,
    /// Free text for humans.
    pub name: Option<String>,
    /// RFC 3339 time after which the key is refused.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
}

/// An API key as stored (never its secret).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    /// Public prefix: `kai_<prefix>_…`.
    pub prefix: String,
    /// Tenant.
    pub tenant_id: String,
    /// `operator`, `admin`, `write` or `read`.
    pub role: String,
    /// Free text.
    pub name: Option<String>,
    /// Expiry.
    pub expires_at: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<String>,
    /// Creation time.
    pub created_at: String,
}

impl From<&ApiKey> for KeyView {
    fn from(k: &ApiKey) -> Self {
        KeyView {
            prefix: k.prefix.clone(),
            tenant_id: k.tenant.clone(),
            role: k.role.as_str().to_string(),
            name: k.name.clone(),
            expires_at: k.expires_at.map(time),
            revoked_at: k.revoked_at.map(time),
            created_at: time(k.created_at),
        }
    }
}

/// A new key with its token (shown this once; only its hash is stored).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    /// The key.
    #[serde(flatten)]
    pub key: KeyView,
    /// `kai_<prefix>_<secret>`: send as `Authorization: Bearer <key>`.
    pub key_token: String,
}

/// `{"items": [key…]}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyList {
    /// Keys, newest first.
    pub items: Vec<KeyView>,
}

/// Query of `GET /openapi/keys`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KeysQuery {
    /// Only this tenant's keys (an admin key: its own tenant, the default).
    pub tenant: Option<String>,
}

/// Query of `GET /openapi/audit`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only this tenant's entries (an admin key: its own tenant, the default).
    pub tenant: Option<String>,
    /// Page size, 1–500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// One recorded control action.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditView {
    /// Tenant acted on.
    pub tenant_id: String,
    /// Prefix of the key that acted, or `cli`.
    pub actor: String,
    /// e.g. `job.create`, `job.cancel`, `key.revoke`.
    pub action: String,
    /// Job id, execution id, key prefix or tenant id.
    pub target: String,
    /// When.
    pub at: String,
}

impl From<AuditEntry> for AuditView {
    fn from(e: AuditEntry) -> Self {
        AuditView {
            tenant_id: e.tenant,
            actor: e.actor,
            action: e.action,
            target: e.target,
            at: time(e.at),
        }
    }
}

/// A page of audit entries, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// Entries.
    pub items: Vec<AuditView>,
    /// Cursor of the next page, `null` on the last.
    pub next_cursor: Option<String>,
}
