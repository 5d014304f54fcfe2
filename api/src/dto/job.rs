//! Job responses: the created job, the job view, its detail and pages.

use super::{ExecutionView, opt_time, time};
use kairos_core::job::Job;
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::store::Page;
use serde::Serialize;
use utoipa::ToSchema;

/// Answer to a create (201) or to its idempotent replay (200).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedJob {
    /// Job id (UUIDv7).
    pub job_id: String,
    /// Current status (`scheduled` for a new job).
    #[schema(schema_with = super::job_status_schema)]
    pub status: String,
    /// Next due time, RFC 3339; `null` once no trigger is left.
    #[schema(format = DateTime)]
    pub next_trigger_at: Option<String>,
}

impl From<&Job> for CreatedJob {
    fn from(job: &Job) -> Self {
        CreatedJob {
            job_id: job.id.clone(),
            status: job.status.as_str().to_string(),
            next_trigger_at: opt_time(job.next_trigger_at),
        }
    }
}

/// A job as stored.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    /// Job id (UUIDv7).
    pub job_id: String,
    /// The caller's name for the job.
    pub job_name: String,
    /// Handler a worker runs.
    pub job_handler: String,
    /// Handler input. For read keys, every sensitive value (under a key
    /// matching `KAIROS_API_SENSITIVE_PARAMS`, at any depth, or at one of the
    /// job's `sensitiveParams`) is replaced by `"••••••"`, and so is every
    /// copy of one in another string; write, admin and
    /// operator keys get the stored values.
    pub params: serde_json::Value,
    /// Paths of params values the job marks sensitive, beyond the configured
    /// key names (dot-separated keys; a number names an array element, `*`
    /// any key or element).
    pub sensitive_params: Vec<String>,
    /// Cron expression; `null` unless the job is a cron job.
    pub cron_expr: Option<String>,
    /// Time zone of the cron expression; `null` unless the job is a cron job.
    pub timezone: Option<String>,
    /// Due time of a one-shot job; `null` for a recurring job.
    #[schema(format = DateTime)]
    pub trigger_at: Option<String>,
    /// Period of a fixed-rate job in ms; `null` otherwise.
    pub every_ms: Option<u64>,
    /// Delay of a fixed-delay job in ms; `null` otherwise.
    pub delay_ms: Option<u64>,
    /// No trigger of a recurring job before this time; `null` if unbounded.
    #[schema(format = DateTime)]
    pub start_at: Option<String>,
    /// No trigger of a recurring job after this time; `null` if unbounded.
    #[schema(format = DateTime)]
    pub end_at: Option<String>,
    /// Misfire policy of a recurring job; `null` for a one-shot job.
    #[schema(schema_with = super::misfire_schema_nullable)]
    pub misfire_policy: Option<String>,
    /// Overlap policy of a recurring job; `null` for a one-shot job.
    #[schema(schema_with = super::overlap_schema_nullable)]
    pub overlap_policy: Option<String>,
    /// Current status.
    #[schema(schema_with = super::job_status_schema)]
    pub status: String,
    /// Next due time; `null` once no trigger is left.
    #[schema(format = DateTime)]
    pub next_trigger_at: Option<String>,
    /// The job's revision: bumped by every change a caller makes (`PATCH`,
    /// pause, resume, cancel), not by the scheduler firing it or recording
    /// its results. Send it back with `PATCH`: it conflicts only when
    /// someone changed the job since you read it.
    pub version: i64,
    /// Where outcomes are POSTed.
    pub callback_url: Option<String>,
    /// The caller's idempotency key.
    pub client_request_id: Option<String>,
    /// Attempts in all, including the first.
    pub max_attempts: u32,
    /// Delay before the second attempt in ms; doubles for each further one.
    pub retry_backoff_ms: u64,
    /// Time limit of one attempt in ms.
    pub timeout_ms: Option<u64>,
    /// Worker group the job runs in; `null`: any worker serving its handler.
    pub worker_group: Option<String>,
    /// 0 (lowest) to 9 (highest); 5 unless the creator chose.
    #[schema(minimum = 0, maximum = 9)]
    pub priority: u8,
    /// How many executions each trigger makes: `single`, `broadcast` (one
    /// per live eligible worker) or `sharded` (`shardCount` of them).
    #[schema(schema_with = super::execution_mode_schema)]
    pub execution_mode: String,
    /// Executions per trigger of a `sharded` job; `null` otherwise.
    pub shard_count: Option<u32>,
    /// At most this many of its executions dispatched or running at once;
    /// `null`: no limit of its own.
    pub max_concurrency: Option<u32>,
    /// Why the job was paused, as given to pause (`null` when none was
    /// given or the job is not paused).
    pub pause_reason: Option<String>,
    /// Outcome of the job's latest finished execution (`null` before the
    /// first): `succeeded`, `failed`, `timed_out`, `lost`, or `cancelled`
    /// (stopped while dispatched or running). For a broadcast or sharded
    /// job, the outcome of its latest finished trigger: `succeeded` if every
    /// execution of it succeeded, else `failed`.
    #[schema(schema_with = super::exec_status_schema_nullable)]
    pub last_result: Option<String>,
    /// When that execution finished; `null` before the first.
    #[schema(format = DateTime)]
    pub last_result_at: Option<String>,
    /// `failing` for a recurring job whose last 3 finished runs failed
    /// (failed, timed out or lost; a success resets the count), else `ok`.
    #[schema(schema_with = super::job_health_schema)]
    pub health: String,
    /// Creation time.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Last change.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<Job> for JobView {
    fn from(job: Job) -> Self {
        let health = job.health().as_str().to_string();
        let mut view = ScheduleView::default();
        match job.schedule {
            Schedule::Once { at } => view.trigger_at = Some(time(at)),
            Schedule::Recurring(r) => {
                match r.rule {
                    Rule::Cron { expr, tz } => {
                        view.cron_expr = Some(expr);
                        view.timezone = Some(tz);
                    }
                    Rule::Every { every_ms } => view.every_ms = Some(every_ms),
                    Rule::Delay { delay_ms } => view.delay_ms = Some(delay_ms),
                }
                view.start_at = opt_time(r.start_at);
                view.end_at = opt_time(r.end_at);
                view.misfire_policy = Some(r.misfire.as_str().to_string());
                view.overlap_policy = Some(r.overlap.as_str().to_string());
            }
        }
        JobView {
            job_id: job.id,
            job_name: job.name,
            job_handler: job.handler,
            params: job.params,
            sensitive_params: job.sensitive_params,
            cron_expr: view.cron_expr,
            timezone: view.timezone,
            trigger_at: view.trigger_at,
            every_ms: view.every_ms,
            delay_ms: view.delay_ms,
            start_at: view.start_at,
            end_at: view.end_at,
            misfire_policy: view.misfire_policy,
            overlap_policy: view.overlap_policy,
            status: job.status.as_str().to_string(),
            next_trigger_at: opt_time(job.next_trigger_at),
            version: job.revision,
            callback_url: job.callback_url,
            client_request_id: job.client_request_id,
            max_attempts: job.retry.max_attempts,
            retry_backoff_ms: job.retry.backoff_ms,
            timeout_ms: job.timeout_ms,
            worker_group: job.worker_group,
            priority: job.priority.get(),
            execution_mode: job.execution_mode.as_str().to_string(),
            shard_count: job.execution_mode.shard_count(),
            max_concurrency: job.max_concurrency,
            pause_reason: job.pause_reason,
            last_result: job.last_result.map(|s| s.as_str().to_string()),
            last_result_at: opt_time(job.last_result_at),
            health,
            created_at: time(job.created_at),
            updated_at: time(job.updated_at),
        }
    }
}

/// The schedule fields of a [`JobView`], `None` where they do not apply.
#[derive(Default)]
struct ScheduleView {
    cron_expr: Option<String>,
    timezone: Option<String>,
    trigger_at: Option<String>,
    every_ms: Option<u64>,
    delay_ms: Option<u64>,
    start_at: Option<String>,
    end_at: Option<String>,
    misfire_policy: Option<String>,
    overlap_policy: Option<String>,
}

/// A job with its newest execution (`GET /openapi/jobs/{id}`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: JobView,
    /// The newest execution, `null` before the first trigger.
    pub last_execution: Option<ExecutionView>,
    /// The newest execution's `waitingFor`: set while it is due but no live
    /// worker serves the job's handler (in its group).
    pub waiting_for: Option<super::WaitingFor>,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobPage {
    /// Jobs on this page.
    pub items: Vec<JobView>,
    /// Cursor of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

impl From<Page<Job>> for JobPage {
    fn from(page: Page<Job>) -> Self {
        JobPage {
            items: page.items.into_iter().map(JobView::from).collect(),
            next_cursor: page.next_cursor,
        }
    }
}

/// Answer to `POST /openapi/jobs/{id}/trigger`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggeredExecution {
    /// Job id.
    pub job_id: String,
    /// The execution that was added, due now.
    pub execution_id: String,
}
