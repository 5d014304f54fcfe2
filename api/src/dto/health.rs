//! Liveness and readiness bodies.

use crate::error::ErrorDetail;
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Answer of `GET /healthz`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HealthBody {
    /// Always `ok` while the process serves requests.
    #[schema(example = "ok")]
    pub status: String,
}

/// Answer of `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyBody {
    /// `ready` or `unavailable`.
    #[schema(example = "ready")]
    pub status: String,
    /// Each dependency (`database` and any registered check): `ok` or what failed.
    pub checks: BTreeMap<String, String>,
    /// On 503, the error naming the failing dependencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}
