//! Column lists and row decoders for every table, and the opaque page cursor.
//!
//! Selects name each column with an alias (`j.id AS id`), so a row decodes the
//! same whether it came from one table or a join.

use crate::db::Row;
use crate::error::corrupt;
use crate::sql::to_u32;
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState, CallbackSubject};
use kairos_core::execution::{ExecEvent, ExecStatus, Execution};
use kairos_core::job::{Job, JobStatus, RetryPolicy};
use kairos_core::shard::{ExecutionMode, Shard};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::trace::CallerTrace;
use kairos_core::worker::{Serves, WorkerInfo, WorkerState};

/// Columns of `jobs`, in insert order.
pub(crate) const JOB_COLS: [&str; 40] = [
    "id",
    "tenant",
    "name",
    "handler",
    "params",
    "schedule_kind",
    "cron_expr",
    "timezone",
    "once_at",
    "next_trigger_at",
    "status",
    "version",
    "callback_url",
    "client_request_id",
    "request_hash",
    "max_attempts",
    "retry_backoff_ms",
    "timeout_ms",
    "created_at",
    "updated_at",
    "every_ms",
    "delay_ms",
    "start_at",
    "end_at",
    "misfire_policy",
    "overlap_policy",
    "worker_group",
    "trace_context",
    "pause_reason",
    "sensitive_params",
    "revision",
    "last_result",
    "last_result_at",
    "fail_streak",
    "priority",
    "lane",
    "execution_mode",
    "shard_count",
    "max_concurrency",
    "cron_dialect",
];

/// Columns of `executions` that make an [`Execution`].
pub(crate) const EXEC_COLS: [&str; 19] = [
    "id",
    "job_id",
    "tenant",
    "scheduled_at",
    "attempt",
    "status",
    "worker_id",
    "output",
    "error",
    "not_before",
    "dispatched_at",
    "started_at",
    "finished_at",
    "stop_requested_at",
    "created_at",
    "progress",
    "shard_index",
    "shard_count",
    "waiting_for",
];

/// Columns of `callbacks` that make a [`Callback`].
pub(crate) const CALLBACK_COLS: [&str; 12] = [
    "id",
    "execution_id",
    "job_id",
    "workflow_run_id",
    "tenant",
    "url",
    "payload",
    "state",
    "attempts",
    "next_attempt_at",
    "last_error",
    "created_at",
];

/// Typed, table-aware access to one row; decode failures are `Corrupt`.
pub(crate) struct R<'a> {
    row: &'a Row,
    pub(crate) table: &'static str,
}

impl<'a> R<'a> {
    pub(crate) fn new(row: &'a Row, table: &'static str) -> Self {
        Self { row, table }
    }

    pub(crate) fn i64(&self, col: &str) -> StoreResult<i64> {
        self.row.get(self.table, col)
    }

    pub(crate) fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        self.row.get(self.table, col)
    }

    pub(crate) fn f64(&self, col: &str) -> StoreResult<f64> {
        self.row.get(self.table, col)
    }

    pub(crate) fn opt_f64(&self, col: &str) -> StoreResult<Option<f64>> {
        self.row.get(self.table, col)
    }

    pub(crate) fn string(&self, col: &str) -> StoreResult<String> {
        self.row.get(self.table, col)
    }

    pub(crate) fn opt_string(&self, col: &str) -> StoreResult<Option<String>> {
        self.row.get(self.table, col)
    }

    /// A time column that is never `NULL`, in milliseconds.
    pub(crate) fn time(&self, col: &str) -> StoreResult<Millis> {
        self.opt_time(col)?
            .ok_or_else(|| corrupt(self.table, format!("column {col}: unexpected NULL")))
    }

    /// A time column, in milliseconds.
    pub(crate) fn opt_time(&self, col: &str) -> StoreResult<Option<Millis>> {
        self.row.time(self.table, col)
    }

    /// A JSON column as text.
    pub(crate) fn opt_json_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.row.json(self.table, col)
    }

    /// The job's `priority` column.
    pub(crate) fn priority(&self) -> StoreResult<kairos_core::priority::Priority> {
        let v = self.i64("priority")?;
        u8::try_from(v)
            .ok()
            .and_then(kairos_core::priority::Priority::new)
            .ok_or_else(|| corrupt(self.table, format!("column priority: {v} out of range")))
    }

    pub(crate) fn u32(&self, col: &str) -> StoreResult<u32> {
        let v = self.i64(col)?;
        to_u32(v).ok_or_else(|| corrupt(self.table, format!("column {col}: {v} out of range")))
    }

    pub(crate) fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>> {
        self.opt_i64(col)?
            .map(|v| {
                u64::try_from(v)
                    .map_err(|_| corrupt(self.table, format!("column {col}: {v} is negative")))
            })
            .transpose()
    }

    pub(crate) fn json(&self, col: &str) -> StoreResult<serde_json::Value> {
        self.opt_json(col)?
            .ok_or_else(|| corrupt(self.table, format!("column {col}: unexpected NULL")))
    }

    pub(crate) fn opt_json(&self, col: &str) -> StoreResult<Option<serde_json::Value>> {
        match self.opt_json_text(col)? {
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| corrupt(self.table, format!("column {col}: {e}"))),
            None => Ok(None),
        }
    }

    pub(crate) fn parsed<T>(&self, col: &str, parse: impl Fn(&str) -> Option<T>) -> StoreResult<T> {
        let s = self.string(col)?;
        parse(&s).ok_or_else(|| corrupt(self.table, format!("column {col}: unknown value {s:?}")))
    }

    pub(crate) fn job_status(&self, col: &str) -> StoreResult<JobStatus> {
        self.parsed(col, JobStatus::parse)
    }

    pub(crate) fn exec_status(&self, col: &str) -> StoreResult<ExecStatus> {
        self.parsed(col, ExecStatus::parse)
    }

    pub(crate) fn opt_exec_status(&self, col: &str) -> StoreResult<Option<ExecStatus>> {
        self.opt_string(col)?
            .map(|s| {
                ExecStatus::parse(&s).ok_or_else(|| {
                    corrupt(self.table, format!("column {col}: unknown value {s:?}"))
                })
            })
            .transpose()
    }

    /// The job's `trace_context` column. A value that is not a caller trace
    /// (written by something else) reads as none: tracing is never worth
    /// failing a read over.
    pub(crate) fn trace(&self) -> StoreResult<Option<CallerTrace>> {
        Ok(self
            .opt_string("trace_context")?
            .and_then(|text| serde_json::from_str::<CallerTrace>(&text).ok())
            .filter(|t| t.context().is_some()))
    }

    /// The job's `sensitive_params` column: a JSON array of paths, `NULL`
    /// for none (every job made before migration 0012).
    pub(crate) fn sensitive_params(&self) -> StoreResult<Vec<String>> {
        match self.opt_json("sensitive_params")? {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v)
                .map_err(|e| corrupt(self.table, format!("column sensitive_params: {e}"))),
        }
    }

    /// The job's `execution_mode` and `shard_count` columns.
    pub(crate) fn execution_mode(&self) -> StoreResult<ExecutionMode> {
        let mode = self.string("execution_mode")?;
        let count = self.opt_i64("shard_count")?.and_then(to_u32);
        ExecutionMode::from_stored(&mode, count).ok_or_else(|| {
            corrupt(
                self.table,
                format!("column execution_mode: {mode:?} with shard_count {count:?}"),
            )
        })
    }

    /// An execution's `shard_index` and `shard_count` columns.
    pub(crate) fn shard(&self) -> StoreResult<Shard> {
        Ok(Shard::new(
            self.u32("shard_index")?,
            self.u32("shard_count")?,
        ))
    }

    /// The retry columns (`max_attempts`, `retry_backoff_ms`).
    pub(crate) fn retry(&self) -> StoreResult<RetryPolicy> {
        Ok(RetryPolicy {
            max_attempts: self.u32("max_attempts")?,
            backoff_ms: self.opt_u64("retry_backoff_ms")?.unwrap_or_default(),
        })
    }
}

pub(crate) fn job(row: &Row) -> StoreResult<Job> {
    let r = R::new(row, "jobs");
    Ok(Job {
        id: r.string("id")?,
        tenant: r.string("tenant")?,
        name: r.string("name")?,
        handler: r.string("handler")?,
        params: r.json("params")?,
        sensitive_params: r.sensitive_params()?,
        schedule: r.schedule()?,
        next_trigger_at: r.opt_time("next_trigger_at")?,
        status: r.job_status("status")?,
        version: r.i64("version")?,
        callback_url: r.opt_string("callback_url")?,
        client_request_id: r.opt_string("client_request_id")?,
        request_hash: r.opt_string("request_hash")?,
        retry: r.retry()?,
        timeout_ms: r.opt_u64("timeout_ms")?,
        worker_group: r.opt_string("worker_group")?,
        max_concurrency: r
            .opt_u64("max_concurrency")?
            .and_then(|v| u32::try_from(v).ok()),
        trace: r.trace()?,
        pause_reason: r.opt_string("pause_reason")?,
        revision: r.i64("revision")?,
        last_result: r.opt_exec_status("last_result")?,
        last_result_at: r.opt_time("last_result_at")?,
        fail_streak: r.u32("fail_streak")?,
        priority: r.priority()?,
        lane: kairos_core::priority::Lane::from_code(r.u32("lane")?.min(255) as u8),
        execution_mode: r.execution_mode()?,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
    })
}

pub(crate) fn execution(row: &Row) -> StoreResult<Execution> {
    let r = R::new(row, "executions");
    Ok(Execution {
        id: r.string("id")?,
        job_id: r.string("job_id")?,
        tenant: r.string("tenant")?,
        scheduled_at: r.time("scheduled_at")?,
        attempt: r.u32("attempt")?,
        status: r.exec_status("status")?,
        worker_id: r.opt_string("worker_id")?,
        output: r.opt_json("output")?,
        error: r.opt_string("error")?,
        not_before: r.time("not_before")?,
        dispatched_at: r.opt_time("dispatched_at")?,
        started_at: r.opt_time("started_at")?,
        finished_at: r.opt_time("finished_at")?,
        stop_requested_at: r.opt_time("stop_requested_at")?,
        created_at: r.time("created_at")?,
        progress: r.opt_f64("progress")?,
        shard: r.shard()?,
        waiting_for: r.opt_string("waiting_for")?,
    })
}

pub(crate) fn event(row: &Row) -> StoreResult<ExecEvent> {
    let r = R::new(row, "execution_events");
    Ok(ExecEvent {
        execution_id: r.string("execution_id")?,
        attempt: r.u32("attempt")?,
        status: r.exec_status("status")?,
        worker_id: r.opt_string("worker_id")?,
        error: r.opt_string("error")?,
        at: r.time("occurred_at")?,
    })
}

pub(crate) fn callback(row: &Row) -> StoreResult<Callback> {
    let r = R::new(row, "callbacks");
    // Exactly one of an execution and a workflow run (migration 0019).
    let subject = match (
        r.opt_string("execution_id")?,
        r.opt_string("workflow_run_id")?,
    ) {
        (Some(execution_id), _) => CallbackSubject::Execution {
            execution_id,
            job_id: r.string("job_id")?,
        },
        (None, Some(run_id)) => CallbackSubject::WorkflowRun { run_id },
        (None, None) => {
            return Err(corrupt(
                "callbacks",
                "neither execution_id nor workflow_run_id is set",
            ));
        }
    };
    Ok(Callback {
        id: r.string("id")?,
        subject,
        tenant: r.string("tenant")?,
        url: r.string("url")?,
        payload: r
            .opt_json_text("payload")?
            .ok_or_else(|| corrupt("callbacks", "column payload: unexpected NULL"))?,
        state: r.parsed("state", CallbackState::parse)?,
        attempts: r.u32("attempts")?,
        next_attempt_at: r.time("next_attempt_at")?,
        last_error: r.opt_string("last_error")?,
        created_at: r.time("created_at")?,
        trace: r.trace()?,
    })
}

pub(crate) fn callback_attempt(row: &Row) -> StoreResult<CallbackAttempt> {
    let r = R::new(row, "callback_attempts");
    let status_code = match r.opt_i64("status_code")? {
        Some(c) => Some(
            u16::try_from(c)
                .map_err(|_| corrupt("callback_attempts", format!("status code {c}")))?,
        ),
        None => None,
    };
    Ok(CallbackAttempt {
        attempt: r.u32("attempt")?,
        at: r.time("attempted_at")?,
        status_code,
        latency_ms: r.opt_u64("latency_ms")?.unwrap_or_default(),
        error: r.opt_string("error")?,
    })
}

pub(crate) fn worker(row: &Row) -> StoreResult<WorkerInfo> {
    let r = R::new(row, "workers");
    Ok(WorkerInfo {
        id: r.string("id")?,
        queue: r.string("queue")?,
        capacity: r.u32("capacity")?,
        active: r.u32("active")?,
        avg_cost_ms: r.f64("avg_cost_ms")?,
        cpu_idle: r.f64("cpu_idle")?,
        state: r.parsed("state", WorkerState::parse)?,
        last_heartbeat_at: r.time("last_heartbeat_at")?,
        registered_at: r.time("registered_at")?,
        serves: Serves {
            handlers: match r.opt_json_text("handlers")? {
                Some(text) => Some(
                    serde_json::from_str(&text)
                        .map_err(|e| corrupt("workers", format!("column handlers: {e}")))?,
                ),
                None => None,
            },
            group: r.opt_string("worker_group")?,
        },
        dispatch_batch: r
            .opt_i64("dispatch_batch")?
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
            .max(1),
        immediate_queue: r.i64("immediate_queue")? != 0,
    })
}
