//! Bodies of `POST /openapi/jobs/batch`: many creates, one answer per item.

use super::CreatedJob;
use crate::error::ErrorDetail;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most jobs one batch may create.
pub const MAX_BATCH: usize = 1_000;

/// Jobs to create together.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchCreateRequest {
    /// 1 to 1,000 create requests, each exactly as `POST /openapi/jobs` takes it.
    #[schema(value_type = Vec<super::CreateJobRequest>)]
    pub jobs: Vec<serde_json::Value>,
}

/// What became of each item, in request order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchCreateResponse {
    /// One result per requested job.
    pub results: Vec<BatchItemResult>,
}

/// The outcome of one item: the status a single create would have answered,
/// with the job or the error.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchItemResult {
    /// Position of the item in `jobs`.
    pub index: usize,
    /// 201 created, 200 replay of a `clientRequestId`, or the error's status
    /// (422 invalid, 409 `clientRequestId` used for another request, 413 params too large).
    pub status: u16,
    /// The job, for 201 and 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<CreatedJob>,
    /// The error, for any other status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}
