//! What callers send: the create and patch bodies and the listing query
//! strings.

use serde::{Deserialize, Deserializer};
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
    /// Paths of params values to mask for people who only look (the
    /// dashboard, read keys), beyond the keys `KAIROS_API_SENSITIVE_PARAMS`
    /// names: dot-separated keys, a number naming an array element and `*`
    /// any key or element, e.g. `["headers.X-Custom", "accounts.*.pin"]`.
    /// At most 64, each 1–255 characters. Workers get the real values.
    pub sensitive_params: Option<Vec<String>>,
    /// Cron expression, read as `cronDialect` says. At most one
    /// of `cronExpr`, `everyMs` and `delayMs`; with none, the job is a one-shot.
    #[schema(example = "0 */5 * * * *")]
    pub cron_expr: Option<String>,
    /// How `cronExpr` is read (default `standard`).
    #[schema(schema_with = super::cron_dialect_schema)]
    pub cron_dialect: Option<String>,
    /// IANA time zone the cron expression is evaluated in.
    #[schema(default = "UTC", example = "Europe/Berlin")]
    pub timezone: Option<String>,
    /// RFC 3339 due time of a one-shot job (absent: now). Refused with
    /// `cronExpr`, `everyMs` or `delayMs`.
    #[schema(format = DateTime, example = "2026-03-01T10:00:00Z")]
    pub trigger_at: Option<String>,
    /// Fixed rate in ms: a trigger every `everyMs` from `startAt` (or from
    /// creation), whether or not the previous execution has finished.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64, example = 60000)]
    pub every_ms: Option<i64>,
    /// Fixed delay in ms: the next trigger is `delayMs` after the previous
    /// execution ended (the first one is at `startAt`, or now).
    #[schema(minimum = 100, maximum = 31_622_400_000_i64, example = 5000)]
    pub delay_ms: Option<i64>,
    /// RFC 3339 time before which a recurring job does not fire.
    #[schema(format = DateTime)]
    pub start_at: Option<String>,
    /// RFC 3339 time after which a recurring job does not fire; the job then
    /// ends `succeeded` after its last execution.
    #[schema(format = DateTime)]
    pub end_at: Option<String>,
    /// Recurring jobs: what to do with triggers missed (more than 5 s late)
    /// while no dispatcher ran.
    #[schema(schema_with = super::misfire_schema)]
    pub misfire_policy: Option<String>,
    /// Recurring jobs: what to do with a trigger while the previous
    /// execution still runs.
    #[schema(schema_with = super::overlap_schema)]
    pub overlap_policy: Option<String>,
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
    /// Worker group (1–255 characters): only workers started with this
    /// `KAIROS_WORKER_GROUP` run the job. Absent: any worker serving the handler.
    #[schema(min_length = 1, max_length = 255)]
    pub worker_group: Option<String>,
    /// 0 (lowest) to 9 (highest): when more is due than the dispatcher
    /// claims at once, higher priorities go first (a trigger waits at most
    /// the dispatcher's starvation bound behind them).
    #[schema(minimum = 0, maximum = 9, default = 5)]
    pub priority: Option<i64>,
    /// How many executions each trigger makes: `single` (default, one on
    /// the least-loaded worker), `broadcast` (one on every live worker
    /// serving the handler, in the job's `workerGroup`, when the trigger
    /// fires) or `sharded` (`shardCount` executions, each told its shard
    /// index and placed by the balancer). A trigger's outcome is the
    /// aggregate: succeeded only if every execution succeeded.
    #[schema(schema_with = super::execution_mode_schema)]
    pub execution_mode: Option<String>,
    /// Executions per trigger of a `sharded` job (required then, refused
    /// otherwise), from 1 to `KAIROS_API_MAX_SHARD_COUNT` (default 1024).
    #[schema(minimum = 1, maximum = 1024, example = 8)]
    pub shard_count: Option<i64>,
    /// At most this many executions of the job dispatched or running at
    /// once (1–100000); a trigger over it waits, `pending`, with
    /// `waitingFor.reason` `concurrency`. Absent: no limit of its own
    /// (handler and tenant limits still apply).
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_concurrency: Option<i64>,
}

/// Body of `PATCH /openapi/jobs/{id}`: `version` plus the fields to change;
/// an absent field keeps its value, `null` clears a clearable one. Unknown
/// fields are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchJobRequest {
    /// The `version` of the job as the caller read it; 409
    /// `version_conflict` if a caller changed the job since (the job's own
    /// triggers and results do not move it).
    pub version: i64,
    /// New handler input (`null` is a value here, not a removal).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub params: Option<Option<serde_json::Value>>,
    /// New list of sensitive params paths (`[]`: none beyond the configured
    /// key names). A sensitive value sent as `"••••••"` (as read keys and
    /// the dashboard show it) keeps its stored value.
    pub sensitive_params: Option<Vec<String>>,
    /// Makes the job a cron job (with `timezone`, or its current zone, or UTC).
    pub cron_expr: Option<String>,
    /// How the cron expression is read: with `cronExpr`, its dialect (a
    /// Quartz job keeps `quartz` when absent; otherwise an expression that
    /// reads differently in the two dialects is refused); alone, a new
    /// reading of the current expression.
    #[schema(schema_with = super::cron_dialect_schema)]
    pub cron_dialect: Option<String>,
    /// New time zone of a cron job.
    pub timezone: Option<String>,
    /// Makes the job a one-shot due at this RFC 3339 time (only before it fired).
    #[schema(format = DateTime)]
    pub trigger_at: Option<String>,
    /// Makes the job a fixed-rate job.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub every_ms: Option<i64>,
    /// Makes the job a fixed-delay job.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub delay_ms: Option<i64>,
    /// New start of the window of a recurring job; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = DateTime, nullable)]
    pub start_at: Option<Option<String>>,
    /// New end of the window of a recurring job; `null` removes it. An end
    /// before the next trigger ends the job (after its running execution).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = DateTime, nullable)]
    pub end_at: Option<Option<String>>,
    /// New callback URL; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable)]
    pub callback_url: Option<Option<String>>,
    /// New number of attempts in all.
    #[schema(minimum = 1, maximum = 100)]
    pub max_attempts: Option<i64>,
    /// New delay before the second attempt in ms.
    #[schema(minimum = 0, maximum = 3_600_000)]
    pub retry_backoff_ms: Option<i64>,
    /// New time limit of one attempt in ms; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86_400_000, nullable)]
    pub timeout_ms: Option<Option<i64>>,
    /// New worker group; `null` lets any worker serving the handler run it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable)]
    pub worker_group: Option<Option<String>>,
    /// New priority, 0 (lowest) to 9 (highest).
    #[schema(minimum = 0, maximum = 9)]
    pub priority: Option<i64>,
    /// New limit on the job's executions dispatched or running at once
    /// (1–100000); `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 100_000, nullable)]
    pub max_concurrency: Option<Option<i64>>,
    /// New misfire policy of a recurring job.
    #[schema(schema_with = super::misfire_schema)]
    pub misfire_policy: Option<String>,
    /// New overlap policy of a recurring job.
    #[schema(schema_with = super::overlap_schema)]
    pub overlap_policy: Option<String>,
}

/// Tells a field sent as `null` (`Some(None)`) from an absent one (`None`).
pub(super) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Query of `GET /openapi/jobs`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListJobsQuery {
    /// Only jobs in this status.
    #[param(schema_with = super::job_status_schema)]
    pub status: Option<String>,
    /// Only jobs of this health: `failing` lists the recurring jobs whose
    /// last 3 finished runs failed, `ok` the others.
    #[param(schema_with = super::job_health_schema)]
    pub health: Option<String>,
    /// Page size, 1–500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// Query of `GET /openapi/executions`: every filter is optional and they
/// combine (all must match).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
#[into_params(rename_all = "camelCase")]
pub struct ListExecutionsQuery {
    /// Only executions in one of these states, comma-separated (e.g.
    /// `failed,timed_out,lost`); every state when absent.
    #[param(example = "failed,timed_out,lost")]
    pub status: Option<String>,
    /// Only executions of this job.
    pub job_id: Option<String>,
    /// Only executions of jobs with this handler.
    pub handler: Option<String>,
    /// Only executions whose current (or last) attempt went to this worker.
    pub worker_id: Option<String>,
    /// Only executions due at or after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<String>,
    /// Only executions due before this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<String>,
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

/// Optional body of `POST /openapi/jobs/{id}/pause`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PauseRequest {
    /// Why the job is paused (at most 500 characters), shown on the job as
    /// `pauseReason` until it is resumed.
    #[schema(max_length = 500, example = "upstream API down for maintenance")]
    pub reason: Option<String>,
}
