//! A tenant's retention overrides as the admin API receives them: each a
//! duration of `s`, `m`, `h` or `d`, from one minute to 36 500 days.

use crate::dto::TenantRetentionRequest;
use crate::error::ApiError;
use kairos_core::retention::{TenantRetention, parse_retention};
use kairos_core::time::Millis;

fn period(field: &str, value: Option<&str>) -> Result<Option<Millis>, ApiError> {
    value
        .map(|v| parse_retention(v).map_err(|e| ApiError::invalid(field, e.0)))
        .transpose()
}

/// The overrides to store; absent ones take the deployment's periods.
pub(crate) fn tenant_retention(req: &TenantRetentionRequest) -> Result<TenantRetention, ApiError> {
    Ok(TenantRetention {
        executions_ms: period("executions", req.executions.as_deref())?,
        jobs_ms: period("jobs", req.jobs.as_deref())?,
        workflow_runs_ms: period("workflowRuns", req.workflow_runs.as_deref())?,
        audit_ms: period("audit", req.audit.as_deref())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_checked_field_by_field() {
        let ok = TenantRetentionRequest {
            executions: Some("1m".into()),
            audit: Some("400d".into()),
            ..TenantRetentionRequest::default()
        };
        let got = tenant_retention(&ok).expect("valid");
        assert_eq!(got.executions_ms, Some(60_000));
        assert_eq!(got.jobs_ms, None);
        assert_eq!(got.audit_ms, Some(400 * 86_400_000));
        for bad in ["30", "1mo", "0d", "10s", "-1d"] {
            let req = TenantRetentionRequest {
                workflow_runs: Some(bad.into()),
                ..TenantRetentionRequest::default()
            };
            match tenant_retention(&req) {
                Err(ApiError::InvalidField { field, .. }) => assert_eq!(field, "workflowRuns"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
