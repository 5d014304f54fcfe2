//! Bodies of `…/tenants/{id}/retention`: a tenant's retention overrides,
//! each a duration like `30d` (`s`, `m`, `h`, `d`), `null` for the
//! deployment's period.

use kairos_core::retention::{TenantRetention, format_duration};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `PUT /openapi/tenants/{id}/retention`. Every override is
/// replaced: an absent (or `null`) one goes back to the deployment's period.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TenantRetentionRequest {
    /// Finished executions, with their events, logs and deliveries.
    #[schema(example = "7d")]
    pub executions: Option<String>,
    /// Finished one-shot jobs (once none of their executions is left).
    #[schema(example = "7d")]
    pub jobs: Option<String>,
    /// Ended workflow runs, with their node rows.
    #[schema(example = "30d")]
    pub workflow_runs: Option<String>,
    /// Audit entries.
    #[schema(example = "365d")]
    pub audit: Option<String>,
}

/// A tenant's retention overrides (`null`: the deployment's period).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantRetentionView {
    /// Tenant id.
    pub tenant_id: String,
    /// Finished executions.
    pub executions: Option<String>,
    /// Finished one-shot jobs.
    pub jobs: Option<String>,
    /// Ended workflow runs.
    pub workflow_runs: Option<String>,
    /// Audit entries.
    pub audit: Option<String>,
}

impl TenantRetentionView {
    /// The view of `tenant`'s stored overrides.
    pub fn new(tenant: &str, r: &TenantRetention) -> Self {
        let show = |ms: Option<i64>| ms.map(format_duration);
        Self {
            tenant_id: tenant.to_string(),
            executions: show(r.executions_ms),
            jobs: show(r.jobs_ms),
            workflow_runs: show(r.workflow_runs_ms),
            audit: show(r.audit_ms),
        }
    }
}
