//! What callers send: the create body and the listing query strings.

use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

/// Body of `POST /openapi/jobs`. Unknown fields are refused.
// Numbers are read as signed integers so that a negative value gets a range
// error naming the field rather than a type error.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateJobRequest {
    /// The caller's name for the job (1–255 characters).
    #[schema(min_length = 1, max_length = 255, example = "nightly-report")]
    pub job_name: String,
    /// Handler a worker runs (1–255 characters), e.g. `noop`, `sleep`, `http`.
    #[schema(min_length = 1, max_length = 255, example = "noop")]
    pub job_handler: String,
    /// Handler input, any JSON (default `null`); at most 64 KiB serialized.
    #[serde(default)]
    pub params: serde_json::Value,
    /// Cron expression, five fields or six with seconds first; absent for a
    /// one-shot job.
    #[schema(example = "0 */5 * * * *")]
    pub cron_expr: Option<String>,
    /// IANA time zone the cron expression is evaluated in.
    #[schema(default = "UTC", example = "Europe/Berlin")]
    pub timezone: Option<String>,
    /// RFC 3339 due time of a one-shot job (absent: now). Refused with `cronExpr`.
    #[schema(format = DateTime, example = "2026-03-01T10:00:00Z")]
    pub trigger_at: Option<String>,
    /// Absolute http(s) URL that receives the outcome of each execution.
    #[schema(example = "https://example.com/hooks/kairos")]
    pub callback_url: Option<String>,
    /// Idempotency key (1–128 characters): the same key with the same body
    /// returns the same job; with a different body, 409.
    #[schema(min_length = 1, max_length = 128)]
    pub client_request_id: Option<String>,
    /// Attempts in all, including the first.
    #[schema(minimum = 1, maximum = 100, default = 1)]
    pub max_attempts: Option<i64>,
    /// Delay before the second attempt in ms; doubles for each further one.
    #[schema(minimum = 0, maximum = 3_600_000, default = 1000)]
    pub retry_backoff_ms: Option<i64>,
    /// Time limit of one attempt in ms (absent: none).
    #[schema(minimum = 1, maximum = 86_400_000)]
    pub timeout_ms: Option<i64>,
}

/// Query of `GET /openapi/jobs`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListJobsQuery {
    /// Only jobs in this status.
    #[param(schema_with = super::job_status_schema)]
    pub status: Option<String>,
    /// Page size, 1–500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// Paging query of the execution listings.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size, 1–500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}
