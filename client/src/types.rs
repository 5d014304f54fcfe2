//! Request and response bodies, as `docs/api.md` describes them (camelCase
//! JSON). Responses ignore fields they do not know, so a newer server works
//! with an older client.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Body of `POST /openapi/jobs`. Start from [`NewJob::one_shot`] or
/// [`NewJob::cron`] and chain the options.
///
/// ```
/// use kairos_client::NewJob;
/// let job = NewJob::one_shot("resize", "thumbnail")
///     .params(serde_json::json!({"width": 640}))
///     .max_attempts(3)
///     .worker_group("media");
/// assert_eq!(serde_json::to_value(&job).unwrap()["workerGroup"], "media");
/// ```
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewJob {
    /// Caller's name for the job.
    pub job_name: String,
    /// Handler a worker runs.
    pub job_handler: String,
    /// Handler input.
    #[serde(skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Params paths shown masked to read keys and in the dashboard, beyond
    /// the key names the server masks anyway.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sensitive_params: Vec<String>,
    /// Cron expression (read as `cron_dialect` says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron_expr: Option<String>,
    /// `standard` (the server's default) or `quartz`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron_dialect: Option<String>,
    /// IANA time zone of the cron expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Fixed rate in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// Fixed delay in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Due time of a one-shot (RFC 3339); absent: now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_at: Option<String>,
    /// Where outcomes are POSTed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Idempotency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    /// Attempts in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Delay before the second attempt in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_backoff_ms: Option<u64>,
    /// Time limit of one attempt in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Only workers of this group run the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_group: Option<String>,
    /// 0 (lowest) to 9 (highest); absent: 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// `single` (absent), `broadcast` or `sharded`: see
    /// [`NewJob::broadcast`] and [`NewJob::sharded`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<String>,
    /// Executions per trigger of a sharded job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_count: Option<u32>,
    /// At most this many of its executions dispatched or running at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

impl NewJob {
    /// Each trigger runs once on every live worker serving the handler (in
    /// the job's worker group); a handler reads its part with
    /// `ctx.shard()`.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").broadcast();
    /// assert_eq!(serde_json::to_value(&j).unwrap()["executionMode"], "broadcast");
    /// ```
    pub fn broadcast(mut self) -> Self {
        self.execution_mode = Some("broadcast".into());
        self.shard_count = None;
        self
    }

    /// Each trigger runs `count` executions, shard indices `0..count`, each
    /// placed on the least-loaded worker and retried on its own.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").sharded(8);
    /// assert_eq!(serde_json::to_value(&j).unwrap()["shardCount"], 8);
    /// ```
    pub fn sharded(mut self, count: u32) -> Self {
        self.execution_mode = Some("sharded".into());
        self.shard_count = Some(count);
        self
    }

    /// A one-shot job due now.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("hello", "noop");
    /// assert_eq!(j.job_handler, "noop");
    /// ```
    pub fn one_shot(name: impl Into<String>, handler: impl Into<String>) -> Self {
        Self {
            job_name: name.into(),
            job_handler: handler.into(),
            ..Self::default()
        }
    }

    /// A cron job (UTC unless [`NewJob::timezone`] says otherwise).
    ///
    /// ```
    /// let j = kairos_client::NewJob::cron("tick", "noop", "*/10 * * * * *");
    /// assert_eq!(j.cron_expr.as_deref(), Some("*/10 * * * * *"));
    /// ```
    pub fn cron(
        name: impl Into<String>,
        handler: impl Into<String>,
        expr: impl Into<String>,
    ) -> Self {
        Self {
            cron_expr: Some(expr.into()),
            ..Self::one_shot(name, handler)
        }
    }

    /// Handler input.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").params(serde_json::json!({"a": 1}));
    /// assert_eq!(j.params["a"], 1);
    /// ```
    pub fn params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Params paths to mask for people who only look (read keys, the
    /// dashboard); workers still get the values.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "http")
    ///     .params(serde_json::json!({"headers": {"X-Custom": "s3cret"}}))
    ///     .sensitive_params(["headers.X-Custom"]);
    /// assert_eq!(serde_json::to_value(&j).unwrap()["sensitiveParams"][0], "headers.X-Custom");
    /// ```
    pub fn sensitive_params<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.sensitive_params = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Reads the cron expression as Quartz does (seconds, optional year,
    /// day-of-week 1–7 = SUN–SAT).
    ///
    /// ```
    /// let j = kairos_client::NewJob::cron("n", "noop", "0 0 2 ? * 2").quartz();
    /// assert_eq!(serde_json::to_value(&j).unwrap()["cronDialect"], "quartz");
    /// ```
    pub fn quartz(mut self) -> Self {
        self.cron_dialect = Some("quartz".into());
        self
    }

    /// Time zone of a cron job.
    ///
    /// ```
    /// let j = kairos_client::NewJob::cron("n", "noop", "0 0 * * *").timezone("Asia/Tokyo");
    /// # let _ = j;
    /// ```
    pub fn timezone(mut self, tz: impl Into<String>) -> Self {
        self.timezone = Some(tz.into());
        self
    }

    /// Attempts in all, including the first.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").max_attempts(5);
    /// # let _ = j;
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Time limit of one attempt in ms.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").timeout_ms(30_000);
    /// # let _ = j;
    /// ```
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Worker group the job must run in.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "http").worker_group("egress");
    /// # let _ = j;
    /// ```
    pub fn worker_group(mut self, group: impl Into<String>) -> Self {
        self.worker_group = Some(group.into());
        self
    }

    /// Priority, 0 (lowest) to 9 (highest): claimed and delivered before
    /// lower ones when more is due than the dispatcher claims at once.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").priority(9);
    /// assert_eq!(serde_json::to_value(&j).unwrap()["priority"], 9);
    /// ```
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = Some(priority);
        self
    }

    /// At most `n` of its executions dispatched or running at once.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "export").max_concurrency(5);
    /// assert_eq!(serde_json::to_value(&j).unwrap()["maxConcurrency"], 5);
    /// ```
    pub fn max_concurrency(mut self, n: u32) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Idempotency key: the same key with the same body returns the same job.
    ///
    /// ```
    /// let j = kairos_client::NewJob::one_shot("n", "noop").client_request_id("order-42");
    /// # let _ = j;
    /// ```
    pub fn client_request_id(mut self, key: impl Into<String>) -> Self {
        self.client_request_id = Some(key.into());
        self
    }
}

/// Body of `PATCH /openapi/jobs/{id}`: the version read plus the fields to
/// change, by their API names (`null` clears a clearable field).
///
/// ```
/// let p = kairos_client::JobPatch::new(3).set("timeoutMs", 5000).clear("callbackUrl");
/// assert_eq!(p.body()["version"], 3);
/// assert!(p.body()["callbackUrl"].is_null());
/// ```
#[derive(Debug, Clone)]
pub struct JobPatch {
    fields: serde_json::Map<String, Value>,
}

impl JobPatch {
    /// A patch of the job at `version`.
    ///
    /// ```
    /// let p = kairos_client::JobPatch::new(1);
    /// # let _ = p;
    /// ```
    pub fn new(version: i64) -> Self {
        let mut fields = serde_json::Map::new();
        fields.insert("version".into(), version.into());
        Self { fields }
    }

    /// Sets `field` (API name, e.g. `cronExpr`) to `value`.
    ///
    /// ```
    /// let p = kairos_client::JobPatch::new(1).set("maxAttempts", 2);
    /// # let _ = p;
    /// ```
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(field.to_string(), value.into());
        self
    }

    /// Clears `field` (sends `null`).
    ///
    /// ```
    /// let p = kairos_client::JobPatch::new(1).clear("workerGroup");
    /// # let _ = p;
    /// ```
    pub fn clear(mut self, field: &str) -> Self {
        self.fields.insert(field.to_string(), Value::Null);
        self
    }

    /// The JSON body.
    ///
    /// ```
    /// assert!(kairos_client::JobPatch::new(1).body().is_object());
    /// ```
    pub fn body(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

/// Paging of list endpoints.
///
/// ```
/// let p = kairos_client::PageRequest::first(10);
/// assert_eq!(p.limit, Some(10));
/// ```
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    /// Page size (server default when `None`).
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

impl PageRequest {
    /// The first page of `limit` items.
    ///
    /// ```
    /// let p = kairos_client::PageRequest::first(50);
    /// assert!(p.cursor.is_none());
    /// ```
    pub fn first(limit: u32) -> Self {
        Self {
            limit: Some(limit),
            cursor: None,
        }
    }

    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(l) = self.limit {
            q.push(("limit", l.to_string()));
        }
        if let Some(c) = &self.cursor {
            q.push(("cursor", c.clone()));
        }
        q
    }
}

/// A page of items with the cursor of the next one.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// Items on this page.
    pub items: Vec<T>,
    /// Cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct List<T> {
    pub(crate) items: Vec<T>,
}

/// Answer to a create.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    /// The job's id.
    pub job_id: String,
    /// Its status (`scheduled`).
    pub status: String,
    /// Its first due time.
    pub next_trigger_at: Option<String>,
}

/// A job as stored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// Id.
    pub job_id: String,
    /// Caller's name.
    pub job_name: String,
    /// Handler.
    pub job_handler: String,
    /// Handler input (sensitive values masked as `"••••••"` for read keys).
    #[serde(default)]
    pub params: Value,
    /// Params paths the job marks sensitive.
    #[serde(default)]
    pub sensitive_params: Vec<String>,
    /// Cron expression of a cron job.
    pub cron_expr: Option<String>,
    /// How it is read (`standard` or `quartz`); `None` for other jobs.
    #[serde(default)]
    pub cron_dialect: Option<String>,
    /// Time zone of a cron job.
    pub timezone: Option<String>,
    /// Due time of a one-shot.
    pub trigger_at: Option<String>,
    /// Fixed rate in ms.
    pub every_ms: Option<u64>,
    /// Fixed delay in ms.
    pub delay_ms: Option<u64>,
    /// `scheduled`, `running`, `paused`, `succeeded`, `failed`, `cancelled`.
    pub status: String,
    /// Next due time.
    pub next_trigger_at: Option<String>,
    /// The job's revision: moved by callers' changes (edits, pause, resume,
    /// cancel), not by its triggers; send it back in a [`JobPatch`].
    pub version: i64,
    /// Callback URL.
    pub callback_url: Option<String>,
    /// Attempts in all.
    pub max_attempts: u32,
    /// Time limit of one attempt in ms.
    pub timeout_ms: Option<u64>,
    /// Worker group.
    #[serde(default)]
    pub worker_group: Option<String>,
    /// Priority, 0–9 (5 when an older server does not say).
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Limit on its executions dispatched or running at once.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Why it was paused, while it is (set through the REST API or the
    /// dashboard; `pause_job` gives none).
    #[serde(default)]
    pub pause_reason: Option<String>,
    /// Outcome of the latest finished execution (`succeeded`, `failed`,
    /// `timed_out`, `lost`, `cancelled`), before the first none; of the
    /// latest finished trigger for a broadcast or sharded job.
    #[serde(default)]
    pub last_result: Option<String>,
    /// `single`, `broadcast` or `sharded` (absent from older servers: single).
    #[serde(default)]
    pub execution_mode: Option<String>,
    /// Executions per trigger of a sharded job.
    #[serde(default)]
    pub shard_count: Option<u32>,
    /// `failing` for a recurring job whose last 3 finished runs failed,
    /// else `ok`.
    #[serde(default)]
    pub health: Option<String>,
    /// Creation time.
    pub created_at: String,
}

/// What a waiting execution needs: a live worker serving `handler` (in
/// `group`), or a free slot under the concurrency limit `limit`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WaitingFor {
    /// `worker` or `concurrency` (absent from servers before limits).
    #[serde(default)]
    pub reason: Option<String>,
    /// The job's handler.
    pub handler: String,
    /// The job's worker group.
    pub group: Option<String>,
    /// The concurrency limit reached (`handler:<name>`, `tenant:<id>`,
    /// `job:<id>`).
    #[serde(default)]
    pub limit: Option<String>,
}

/// `GET /openapi/jobs/{id}`: the job and its newest execution.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The newest execution.
    pub last_execution: Option<Execution>,
    /// Set while the newest execution waits for a worker serving the handler.
    #[serde(default)]
    pub waiting_for: Option<WaitingFor>,
}

/// One trigger of a job.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// Id.
    pub execution_id: String,
    /// Job.
    pub job_id: String,
    /// `pending`, `dispatched`, `running`, `succeeded`, `failed`, …
    pub status: String,
    /// Current attempt.
    pub attempt: u32,
    /// Worker of the current attempt.
    pub worker_id: Option<String>,
    /// Due time.
    pub scheduled_at: String,
    /// Start of the current attempt.
    pub started_at: Option<String>,
    /// End.
    pub finished_at: Option<String>,
    /// Handler output.
    pub output: Option<Value>,
    /// Error text.
    pub error: Option<String>,
    /// Latest progress, 0–100.
    #[serde(default)]
    pub progress: Option<f64>,
    /// Set while it waits for a worker serving its handler.
    #[serde(default)]
    pub waiting_for: Option<WaitingFor>,
    /// Its part of a broadcast or sharded trigger (0 for a single job).
    #[serde(default)]
    pub shard_index: u32,
    /// Executions of its trigger (1 for a single job; 0 from older servers).
    #[serde(default)]
    pub shard_count: u32,
}

/// One transition of an execution.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecEvent {
    /// State entered.
    pub status: String,
    /// Attempt.
    pub attempt: u32,
    /// Worker.
    pub worker_id: Option<String>,
    /// Error text.
    pub error: Option<String>,
    /// When.
    pub at: String,
}

/// `GET /openapi/executions/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ExecutionDetail {
    /// The execution.
    #[serde(flatten)]
    pub execution: Execution,
    /// Its history, oldest first.
    pub events: Vec<ExecEvent>,
}

/// Answer to a trigger.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Triggered {
    /// Job.
    pub job_id: String,
    /// The new execution.
    pub execution_id: String,
}

/// A line a handler wrote.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// Position in the execution's log.
    pub seq: i64,
    /// Attempt that wrote it.
    pub attempt: u32,
    /// Worker.
    pub worker_id: String,
    /// When (worker clock).
    pub at: String,
    /// `debug`, `info`, `warn`, `error`.
    pub level: String,
    /// Text.
    pub message: String,
}

/// A worker and its latest heartbeat figures.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    /// Id.
    pub worker_id: String,
    /// `online`, `draining`, `offline`.
    pub state: String,
    /// Parallel handlers.
    pub capacity: u32,
    /// Running at the last heartbeat.
    pub active: u32,
    /// Last heartbeat.
    pub last_heartbeat_at: String,
    /// Handlers served; `None` for a worker that does not say (serves all).
    #[serde(default)]
    pub handlers: Option<Vec<String>>,
    /// Worker group.
    #[serde(default)]
    pub group: Option<String>,
}

/// The priority of a job whose server predates priorities.
fn default_priority() -> u8 {
    5
}
