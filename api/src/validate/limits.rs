//! A tenant's limit overrides as the admin API receives them (create and
//! `PUT …/limits`): rates positive and finite, bursts at least 1.

use crate::dto::TenantLimitsRequest;
use crate::error::ApiError;
use kairos_core::tenant::TenantLimits;

fn rate(field: &str, value: Option<f64>) -> Result<Option<f64>, ApiError> {
    match value {
        Some(r) if !r.is_finite() || r <= 0.0 => Err(ApiError::invalid(
            field,
            format!("{field} must be a positive number"),
        )),
        other => Ok(other),
    }
}

fn burst(field: &str, value: Option<u32>) -> Result<Option<u32>, ApiError> {
    match value {
        Some(0) => Err(ApiError::invalid(
            field,
            format!("{field} must be at least 1"),
        )),
        other => Ok(other),
    }
}

/// The overrides to store; absent ones take the server defaults.
pub(crate) fn tenant_limits(req: &TenantLimitsRequest) -> Result<TenantLimits, ApiError> {
    Ok(TenantLimits {
        create_rate_per_sec: rate("createRatePerSec", req.create_rate_per_sec)?,
        create_burst: burst("createBurst", req.create_burst)?,
        max_live_jobs: req.max_live_jobs,
        action_rate_per_sec: rate("actionRatePerSec", req.action_rate_per_sec)?,
        action_burst: burst("actionBurst", req.action_burst)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_field_by_field() {
        let ok = TenantLimitsRequest {
            create_rate_per_sec: Some(0.5),
            action_burst: Some(1),
            ..TenantLimitsRequest::default()
        };
        let got = tenant_limits(&ok).expect("valid");
        assert_eq!(
            (got.create_rate_per_sec, got.action_burst, got.create_burst),
            (Some(0.5), Some(1), None)
        );
        for (req, field) in [
            (
                TenantLimitsRequest {
                    action_rate_per_sec: Some(0.0),
                    ..TenantLimitsRequest::default()
                },
                "actionRatePerSec",
            ),
            (
                TenantLimitsRequest {
                    create_rate_per_sec: Some(f64::NAN),
                    ..TenantLimitsRequest::default()
                },
                "createRatePerSec",
            ),
            (
                TenantLimitsRequest {
                    create_burst: Some(0),
                    ..TenantLimitsRequest::default()
                },
                "createBurst",
            ),
        ] {
            assert_eq!(tenant_limits(&req).unwrap_err().field(), Some(field));
        }
    }
}
