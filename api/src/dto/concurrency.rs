//! Bodies of the operators' concurrency limits (`/openapi/limits`).

use kairos_core::store::LimitUsage;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `PUT /openapi/limits/{scope}/{name}`. Unknown fields are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConcurrencyLimitRequest {
    /// Executions dispatched or running at once under the limit (1–100000);
    /// absent: no cap on what runs at once.
    #[schema(minimum = 1, maximum = 100_000, example = 5)]
    pub max_running: Option<i64>,
    /// Dispatches per second (above 0, at most 100000), in bursts of up to
    /// one second's worth; absent: no cap on the rate. At least one of the
    /// two is needed.
    #[schema(example = 50.0)]
    pub rate_per_sec: Option<f64>,
}

/// A concurrency limit and what runs under it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyLimitView {
    /// `handler` (every execution of the handler, across tenants) or
    /// `tenant` (every execution of the tenant's jobs).
    #[schema(example = "handler")]
    pub scope: String,
    /// The handler's name or the tenant's id.
    #[schema(example = "export")]
    pub name: String,
    /// Executions dispatched or running at once it allows; `null`: no cap.
    pub max_running: Option<u32>,
    /// Dispatches per second it allows; `null`: no cap.
    pub rate_per_sec: Option<f64>,
    /// Executions dispatched or running under it now.
    pub running: u32,
}

impl From<LimitUsage> for ConcurrencyLimitView {
    fn from(u: LimitUsage) -> Self {
        ConcurrencyLimitView {
            scope: u.limit.scope.as_str().to_string(),
            name: u.limit.name,
            max_running: u.limit.max_running,
            rate_per_sec: u.limit.rate_per_sec,
            running: u.running,
        }
    }
}

/// `GET /openapi/limits`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ConcurrencyLimitList {
    /// Every limit, by scope and name.
    pub items: Vec<ConcurrencyLimitView>,
}
