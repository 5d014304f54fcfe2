//! Turns caller input into domain values: a [`CreateJobRequest`] into a
//! [`NewJob`] with its idempotency fingerprint, a [`crate::dto::PatchJobRequest`]
//! into a [`kairos_core::store::JobUpdate`] (in `patch`), and listing
//! parameters into filters. Every refusal is an [`ApiError`] naming the field.

mod limits;
mod patch;
mod retention;
pub(crate) mod schedule;
pub(crate) mod storable;
pub(crate) mod workflow;

pub(crate) use limits::tenant_limits;
pub(crate) use retention::tenant_retention;

pub(crate) use schedule::time_field;

pub use patch::job_update;

use crate::ApiConfig;
use crate::dto::CreateJobRequest;
use crate::error::ApiError;
use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobHealth, JobStatus, NewJob, RetryPolicy};
use kairos_core::priority::Priority;
use kairos_core::schedule::{MisfirePolicy, OverlapPolicy};
use kairos_core::shard::ExecutionMode;
use kairos_core::time::Millis;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Longest job name or handler name.
const MAX_NAME_CHARS: usize = 255;
/// Longest callback URL.
const MAX_URL_CHARS: usize = 2048;
/// Longest idempotency key.
const MAX_CLIENT_REQUEST_ID_CHARS: usize = 128;
/// Page size when none is asked for.
const DEFAULT_PAGE: u32 = 50;
/// Largest page.
const MAX_PAGE: u32 = 500;

/// Validates a create request and builds the job to store, with id `id`,
/// created at `now`. Nothing is written before this succeeds.
pub fn new_job(
    req: CreateJobRequest,
    cfg: &ApiConfig,
    tenant: &str,
    id: String,
    now: Millis,
) -> Result<NewJob, ApiError> {
    let name = text("jobName", &req.job_name, MAX_NAME_CHARS)?;
    let handler = text("jobHandler", &req.job_handler, MAX_NAME_CHARS)?;
    check_params(&req.params, cfg)?;
    let sensitive_params = sensitive_paths(req.sensitive_params.as_deref())?;
    let tz = req.timezone.clone().unwrap_or_else(|| "UTC".to_string());
    let fields = schedule::Fields {
        cron_expr: req.cron_expr.as_deref(),
        timezone: Some(&tz),
        trigger_at: schedule::time_field("triggerAt", req.trigger_at.as_deref())?,
        every_ms: req.every_ms,
        delay_ms: req.delay_ms,
        start_at: schedule::time_field("startAt", req.start_at.as_deref())?,
        end_at: schedule::time_field("endAt", req.end_at.as_deref())?,
        misfire: req.misfire_policy.as_deref(),
        overlap: req.overlap_policy.as_deref(),
    };
    let schedule = schedule::build(&fields, now)?;
    let next_trigger_at = schedule
        .first_trigger(now)
        .map_err(schedule::schedule_error)?;
    let callback_url = req.callback_url.as_deref().map(callback_url).transpose()?;
    if let Some(key) = &req.client_request_id {
        let n = key.chars().count();
        if n == 0 || n > MAX_CLIENT_REQUEST_ID_CHARS {
            return Err(ApiError::invalid(
                "clientRequestId",
                format!(
                    "clientRequestId must be 1–{MAX_CLIENT_REQUEST_ID_CHARS} characters, got {n}"
                ),
            ));
        }
    }
    let retry = retry_policy(
        req.max_attempts,
        req.retry_backoff_ms,
        RetryPolicy::default(),
    )?;
    let timeout_ms = req.timeout_ms.map(timeout).transpose()?;
    let worker_group = req.worker_group.as_deref().map(group).transpose()?;
    let priority = req.priority.map(priority).transpose()?.unwrap_or_default();
    let execution_mode = execution_mode(
        req.execution_mode.as_deref(),
        req.shard_count,
        cfg.api_max_shard_count,
    )?;
    let max_concurrency = req.max_concurrency.map(max_concurrency).transpose()?;

    // The fingerprint covers the request with defaults applied and times
    // normalised, so equivalent spellings of one request replay each other.
    let mut fingerprint = json!({
        "v": 1,
        "jobName": name,
        "jobHandler": handler,
        "params": req.params,
        "cronExpr": req.cron_expr,
        "timezone": tz,
        "triggerAt": fields.trigger_at,
        "callbackUrl": callback_url,
        "clientRequestId": req.client_request_id,
        "maxAttempts": retry.max_attempts,
        "retryBackoffMs": retry.backoff_ms,
        "timeoutMs": timeout_ms,
    });
    // Fields added after the first release enter the fingerprint only when
    // they say something, so earlier requests keep their fingerprint.
    if let Some(r) = schedule.recurrence() {
        let extra = [
            ("everyMs", json!(fields.every_ms)),
            ("delayMs", json!(fields.delay_ms)),
            ("startAt", json!(r.start_at)),
            ("endAt", json!(r.end_at)),
            (
                "misfirePolicy",
                json!((r.misfire != MisfirePolicy::default()).then_some(r.misfire.as_str())),
            ),
            (
                "overlapPolicy",
                json!((r.overlap != OverlapPolicy::default()).then_some(r.overlap.as_str())),
            ),
        ];
        for (key, value) in extra.into_iter().filter(|(_, v)| !v.is_null()) {
            fingerprint[key] = value;
        }
    }
    if let Some(g) = &worker_group {
        fingerprint["workerGroup"] = json!(g);
    }
    if let Some(n) = max_concurrency {
        fingerprint["maxConcurrency"] = json!(n);
    }
    if !sensitive_params.is_empty() {
        fingerprint["sensitiveParams"] = json!(sensitive_params);
    }
    if priority != Priority::DEFAULT {
        fingerprint["priority"] = json!(priority.get());
    }
    if execution_mode != ExecutionMode::Single {
        fingerprint["executionMode"] = json!(execution_mode.as_str());
        fingerprint["shardCount"] = json!(execution_mode.shard_count());
    }

    Ok(NewJob {
        execution_mode,
        id,
        tenant: tenant.to_string(),
        name: name.to_string(),
        handler: handler.to_string(),
        params: req.params,
        sensitive_params,
        schedule,
        next_trigger_at,
        callback_url,
        client_request_id: req.client_request_id,
        request_hash: Some(request_hash(&fingerprint)),
        retry,
        timeout_ms,
        worker_group,
        priority,
        max_concurrency,
        trace: None,
        created_at: now,
        created_by: None,
    })
}

/// A job's `sensitiveParams`: each path well formed, not too many (absent:
/// none).
pub(crate) fn sensitive_paths(paths: Option<&[String]>) -> Result<Vec<String>, ApiError> {
    let paths = paths.unwrap_or_default().to_vec();
    kairos_core::sensitive::check_paths(&paths)
        .map_err(|e| ApiError::invalid("sensitiveParams", format!("sensitiveParams: {e}")))?;
    Ok(paths)
}

/// A job's `executionMode` and `shardCount` (see
/// [`kairos_core::shard::ExecutionMode::parse`]); the refusal names the field.
pub(crate) fn execution_mode(
    mode: Option<&str>,
    shard_count: Option<i64>,
    max: u32,
) -> Result<ExecutionMode, ApiError> {
    let count = match shard_count {
        Some(n) => Some(u64::try_from(n).map_err(|_| {
            ApiError::invalid(
                "shardCount",
                format!("shardCount must be between 1 and {max}"),
            )
        })?),
        None => None,
    };
    ExecutionMode::parse(mode, count, max).map_err(|e| ApiError::invalid(e.field, e.to_string()))
}

/// A worker group name: 1–255 characters.
pub(crate) fn group(raw: &str) -> Result<String, ApiError> {
    text("workerGroup", raw, MAX_NAME_CHARS).map(str::to_string)
}

/// A job's `maxConcurrency`: 1–100000.
pub(crate) fn max_concurrency(raw: i64) -> Result<u32, ApiError> {
    kairos_core::concurrency::check_limit(raw)
        .map_err(|e| ApiError::invalid("maxConcurrency", format!("maxConcurrency {e}, got {raw}")))
}

/// Refuses `params` larger than the configured limit once serialized.
fn check_params(params: &Value, cfg: &ApiConfig) -> Result<(), ApiError> {
    let params_len = serde_json::to_vec(params)
        .map_err(|e| ApiError::invalid("params", format!("params cannot be serialized: {e}")))?
        .len();
    if params_len > cfg.max_params_bytes {
        return Err(ApiError::PayloadTooLarge(format!(
            "params is {params_len} bytes serialized; the limit is {} bytes",
            cfg.max_params_bytes
        )));
    }
    Ok(())
}

/// The retry policy from optional `maxAttempts`/`retryBackoffMs`, each
/// falling back to `base`.
fn retry_policy(
    max_attempts: Option<i64>,
    backoff_ms: Option<i64>,
    base: RetryPolicy,
) -> Result<RetryPolicy, ApiError> {
    let max_attempts = ranged(
        "maxAttempts",
        max_attempts.unwrap_or(i64::from(base.max_attempts)),
        1,
        100,
    )?;
    let backoff_ms = ranged(
        "retryBackoffMs",
        backoff_ms.unwrap_or(i64::try_from(base.backoff_ms).unwrap_or(i64::MAX)),
        0,
        3_600_000,
    )?;
    Ok(RetryPolicy {
        max_attempts: max_attempts.unsigned_abs() as u32,
        backoff_ms: backoff_ms.unsigned_abs(),
    })
}

/// A `timeoutMs` value.
fn priority(p: i64) -> Result<Priority, ApiError> {
    let v = ranged("priority", p, 0, i64::from(Priority::MAX.get()))?;
    u8::try_from(v)
        .ok()
        .and_then(Priority::new)
        .ok_or_else(|| ApiError::invalid("priority", "priority must be 0 to 9"))
}

fn timeout(ms: i64) -> Result<u64, ApiError> {
    ranged("timeoutMs", ms, 1, 86_400_000).map(i64::unsigned_abs)
}

fn text<'a>(field: &str, value: &'a str, max: usize) -> Result<&'a str, ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(
            field,
            format!("{field} must not be empty"),
        ));
    }
    let n = value.chars().count();
    if n > max {
        return Err(ApiError::invalid(
            field,
            format!("{field} is {n} characters; the limit is {max}"),
        ));
    }
    Ok(value)
}

fn ranged(field: &str, value: i64, min: i64, max: i64) -> Result<i64, ApiError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::invalid(
            field,
            format!("{field} must be between {min} and {max}, got {value}"),
        ))
    }
}

fn callback_url(raw: &str) -> Result<String, ApiError> {
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(ApiError::InvalidUrl(format!(
            "callbackUrl is longer than {MAX_URL_CHARS} characters"
        )));
    }
    let url = url::Url::parse(raw).map_err(|e| {
        ApiError::InvalidUrl(format!("callbackUrl {raw:?} is not an absolute URL: {e}"))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::InvalidUrl(format!(
            "callbackUrl must use http or https, not {:?}",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::InvalidUrl(format!(
            "callbackUrl {raw:?} names no host"
        )));
    }
    Ok(raw.to_string())
}

/// Hex SHA-256 of the canonical JSON of `value` (object keys sorted at every
/// level, no whitespace), so key order in the caller's body does not matter.
pub fn request_hash(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Page size from the `limit` query parameter.
pub fn page_limit(raw: Option<&str>) -> Result<u32, ApiError> {
    let Some(raw) = raw.filter(|s| !s.is_empty()) else {
        return Ok(DEFAULT_PAGE);
    };
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| {
            ApiError::invalid(
                "limit",
                format!("limit must be an integer between 1 and {MAX_PAGE}, got {raw:?}"),
            )
        })
}

/// Job status filter from the `status` query parameter.
pub fn job_status(raw: Option<&str>) -> Result<Option<JobStatus>, ApiError> {
    match raw.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => JobStatus::parse(s).map(Some).ok_or_else(|| {
            let known: Vec<_> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid(
                "status",
                format!("unknown status {s:?}; expected one of {}", known.join(", ")),
            )
        }),
    }
}

/// The `health` filter of a job listing.
pub fn job_health(raw: Option<&str>) -> Result<Option<JobHealth>, ApiError> {
    match raw.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => JobHealth::parse(s).map(Some).ok_or_else(|| {
            ApiError::invalid(
                "health",
                format!("unknown health {s:?}; expected ok or failing"),
            )
        }),
    }
}

/// Execution states from the comma-separated `status` query parameter
/// (empty: every state).
pub fn exec_statuses(raw: Option<&str>) -> Result<Vec<ExecStatus>, ApiError> {
    raw.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            ExecStatus::parse(s).ok_or_else(|| {
                let known: Vec<_> = ExecStatus::ALL.iter().map(|s| s.as_str()).collect();
                ApiError::invalid(
                    "status",
                    format!(
                        "unknown status {s:?}; expected one or more of {}",
                        known.join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// A listing's `from`/`to` range: RFC 3339 times, `from` before `to`.
pub fn time_range(
    from: Option<&str>,
    to: Option<&str>,
) -> Result<(Option<Millis>, Option<Millis>), ApiError> {
    let from = time_field("from", from.filter(|s| !s.is_empty()))?;
    let to = time_field("to", to.filter(|s| !s.is_empty()))?;
    if let (Some(f), Some(t)) = (from, to)
        && f >= t
    {
        return Err(ApiError::invalid("to", "to must be later than from"));
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod create_tests;
