//! What a handler is: the [`Handler`] trait, the [`JobContext`] it receives,
//! the closed [`HandlerOutcome`] it returns, typed handlers ([`typed`]) with
//! their [`HandlerError`], and the registry of named handlers.

use crate::logs::LogSink;
use async_trait::async_trait;
use kairos_core::protocol::LogLevel;
use kairos_core::time::Millis;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a handler knows about the attempt it runs.
///
/// ```
/// use kairos_worker::{HandlerOutcome, JobContext};
///
/// async fn handler(ctx: JobContext) -> HandlerOutcome {
///     ctx.info(format!("attempt {} of execution {}", ctx.attempt, ctx.execution_id));
///     ctx.progress(50.0);
///     HandlerOutcome::Success(ctx.params)
/// }
/// # let _ = kairos_worker::Worker::builder().handler("h", handler);
/// ```
#[derive(Debug, Clone)]
pub struct JobContext {
    /// Execution id; the same across retries of one trigger.
    pub execution_id: String,
    /// Job the execution belongs to.
    pub job_id: String,
    /// Attempt number from 1, so a handler can tell a retry from a first run.
    pub attempt: u32,
    /// Due time of the trigger (ms UTC).
    pub scheduled_at: Millis,
    /// When the worker stops the attempt as timed out (ms UTC, this
    /// worker's clock), if the job has a `timeoutMs`.
    pub deadline: Option<Millis>,
    /// The job's params, as submitted.
    pub params: serde_json::Value,
    /// Cancelled when the attempt timed out, was stopped at the scheduler's
    /// request (job cancelled, execution replaced) or the worker shuts down:
    /// the result is already being reported, so stop and release resources.
    pub cancel: CancellationToken,
    /// Where log lines and progress go; silent when the context was made by hand.
    pub(crate) logs: LogSink,
    /// This execution's part of a broadcast or sharded trigger.
    pub(crate) shard: kairos_core::shard::Shard,
    /// A workflow node's parents' outputs (see [`JobContext::parent_outputs`]).
    pub(crate) parent_outputs: Option<serde_json::Value>,
}

impl JobContext {
    /// A context for calling a handler outside a worker (tests, tools): log
    /// lines and progress go nowhere.
    ///
    /// ```
    /// let ctx = kairos_worker::JobContext::detached("exec-1", serde_json::json!({"n": 1}));
    /// assert_eq!(ctx.attempt, 1);
    /// ctx.info("dropped: no worker is listening");
    /// ```
    pub fn detached(execution_id: impl Into<String>, params: serde_json::Value) -> Self {
        Self {
            execution_id: execution_id.into(),
            job_id: String::new(),
            attempt: 1,
            scheduled_at: kairos_core::time::now_ms(),
            deadline: None,
            params,
            cancel: CancellationToken::new(),
            logs: LogSink::silent(),
            shard: kairos_core::shard::Shard::SINGLE,
            parent_outputs: None,
        }
    }

    /// Which part of its trigger this execution runs: `(index, count)`,
    /// index from 0. A sharded job's trigger runs `shardCount` executions,
    /// a broadcast job's one per eligible worker; a single job's is `(0, 1)`.
    /// Split the work by it, e.g. take the rows whose id modulo `count` is
    /// `index`.
    ///
    /// ```
    /// let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// assert_eq!(ctx.shard(), (0, 1));
    /// assert_eq!(ctx.with_shard(2, 8).shard(), (2, 8));
    /// ```
    pub fn shard(&self) -> (u32, u32) {
        (self.shard.index, self.shard.count)
    }

    /// The context as shard `index` of `count` (for calling a handler by
    /// hand, as the worker would for that shard). `count` is at least 1 and
    /// `index` below it.
    pub fn with_shard(mut self, index: u32, count: u32) -> Self {
        let count = count.max(1);
        self.shard = kairos_core::shard::Shard::new(index.min(count - 1), count);
        self
    }

    /// For a workflow node, its parents' outputs: an object keyed by parent
    /// node id, each the output the parent's execution reported (`null` if
    /// it reported none, or was not run — an `always` or `onFailure` edge).
    /// `None` for a root node and for executions that are no workflow node.
    ///
    /// ```
    /// # use serde_json::json;
    /// let ctx = kairos_worker::JobContext::detached("e", json!(null))
    ///     .with_parent_outputs(json!({"extract": {"rows": 3}}));
    /// assert_eq!(ctx.parent_outputs().unwrap()["extract"]["rows"], 3);
    /// assert_eq!(kairos_worker::JobContext::detached("e", json!(null)).parent_outputs(), None);
    /// ```
    pub fn parent_outputs(&self) -> Option<&serde_json::Value> {
        self.parent_outputs.as_ref()
    }

    /// The context with these parents' outputs (for calling a workflow
    /// node's handler by hand, as the worker would).
    pub fn with_parent_outputs(mut self, outputs: serde_json::Value) -> Self {
        self.parent_outputs = Some(outputs);
        self
    }

    /// Writes a log line, readable at `GET /openapi/executions/{id}/logs`.
    /// Never blocks: lines are batched and sent in the background (if the
    /// worker cannot keep up, lines are dropped rather than slowing the
    /// handler).
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// use kairos_core::protocol::LogLevel;
    /// ctx.log(LogLevel::Warn, "disk almost full");
    /// ```
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        self.logs
            .line(&self.execution_id, self.attempt, level, message.into());
    }

    /// [`JobContext::log`] at `info`.
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// ctx.info("step 1 done");
    /// ```
    pub fn info(&self, message: impl Into<String>) {
        self.log(LogLevel::Info, message);
    }

    /// [`JobContext::log`] at `warn`.
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// ctx.warn("slow upstream");
    /// ```
    pub fn warn(&self, message: impl Into<String>) {
        self.log(LogLevel::Warn, message);
    }

    /// [`JobContext::log`] at `error`.
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// ctx.error("upstream refused");
    /// ```
    pub fn error(&self, message: impl Into<String>) {
        self.log(LogLevel::Error, message);
    }

    /// Reports progress, 0–100 (clamped); the execution view shows the latest.
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// for i in 1..=4 {
    ///     ctx.progress(f64::from(i) * 25.0);
    /// }
    /// ```
    pub fn progress(&self, percent: f64) {
        if percent.is_finite() {
            self.logs
                .progress(&self.execution_id, self.attempt, percent.clamp(0.0, 100.0));
        }
    }

    /// Resolves when the attempt must stop (see [`JobContext::cancel`]):
    /// race long work against it.
    ///
    /// ```
    /// # async fn f(ctx: kairos_worker::JobContext) {
    /// tokio::select! {
    ///     _ = ctx.cancelled() => return,
    ///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
    /// }
    /// # }
    /// ```
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Time left before the deadline, if the job has a timeout.
    ///
    /// ```
    /// # let ctx = kairos_worker::JobContext::detached("e", serde_json::Value::Null);
    /// assert_eq!(ctx.time_left(), None);
    /// ```
    pub fn time_left(&self) -> Option<std::time::Duration> {
        self.deadline.map(|d| {
            let left = d.saturating_sub(kairos_core::time::now_ms()).max(0);
            std::time::Duration::from_millis(left as u64)
        })
    }
}

/// How a handler ended. Closed on purpose: the worker maps it to a result kind
/// (`succeeded` / `failed`); timeouts and panics are detected by the worker.
#[derive(Debug, Clone, PartialEq)]
pub enum HandlerOutcome {
    /// Done; the value becomes the execution's output.
    Success(serde_json::Value),
    /// Failed; the text becomes the execution's error and the dispatcher
    /// retries if the job's policy allows.
    Failure(String),
    /// Failed, and a retry cannot help (bad params, a permanent refusal):
    /// the execution fails now, whatever attempts the job has left.
    PermanentFailure(String),
}

impl HandlerOutcome {
    /// A (retryable) failure from anything printable.
    ///
    /// ```
    /// use kairos_worker::HandlerOutcome;
    /// assert_eq!(HandlerOutcome::failure(42), HandlerOutcome::Failure("42".into()));
    /// ```
    pub fn failure(e: impl std::fmt::Display) -> Self {
        HandlerOutcome::Failure(e.to_string())
    }
}

/// Why a typed handler failed, and whether a retry makes sense.
///
/// Any error type converts into a retryable `HandlerError`, so `?` works on
/// I/O and HTTP errors; say [`HandlerError::permanent`] for failures a retry
/// cannot fix.
///
/// ```
/// use kairos_worker::HandlerError;
///
/// fn parse(n: &str) -> Result<u32, HandlerError> {
///     n.parse::<u32>().map_err(|e| HandlerError::permanent(format!("not a number: {e}")))
/// }
/// assert!(!parse("x").unwrap_err().is_retryable());
/// let io: HandlerError = std::io::Error::other("connection reset").into();
/// assert!(io.is_retryable());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError {
    message: String,
    retryable: bool,
}

impl HandlerError {
    /// A failure worth retrying (per the job's `maxAttempts`).
    ///
    /// ```
    /// assert!(kairos_worker::HandlerError::retryable("upstream 503").is_retryable());
    /// ```
    pub fn retryable(message: impl std::fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retryable: true,
        }
    }

    /// A failure no retry can fix: the execution fails at once.
    ///
    /// ```
    /// assert!(!kairos_worker::HandlerError::permanent("no such customer").is_retryable());
    /// ```
    pub fn permanent(message: impl std::fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retryable: false,
        }
    }

    /// Whether the dispatcher may retry.
    ///
    /// ```
    /// assert!(kairos_worker::HandlerError::retryable("x").is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The text recorded as the execution's error.
    ///
    /// ```
    /// assert_eq!(kairos_worker::HandlerError::permanent("bad").message(), "bad");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for HandlerError {
    fn from(e: E) -> Self {
        HandlerError::retryable(e)
    }
}

impl From<HandlerError> for HandlerOutcome {
    fn from(e: HandlerError) -> Self {
        if e.retryable {
            HandlerOutcome::Failure(e.message)
        } else {
            HandlerOutcome::PermanentFailure(e.message)
        }
    }
}

/// Code a worker can run for a named job handler.
///
/// Implement it on a type that holds what the handler needs (clients,
/// configuration), or register an `async fn(JobContext) -> HandlerOutcome`
/// directly; for typed params and output see [`typed`].
///
/// ```
/// use kairos_worker::{Handler, HandlerOutcome, JobContext};
///
/// struct Greeter { greeting: String }
///
/// #[async_trait::async_trait]
/// impl Handler for Greeter {
///     async fn run(&self, ctx: JobContext) -> HandlerOutcome {
///         let name = ctx.params["name"].as_str().unwrap_or("world");
///         HandlerOutcome::Success(format!("{}, {name}!", self.greeting).into())
///     }
/// }
/// # let _ = kairos_worker::Worker::builder().handler("greet", Greeter { greeting: "Hello".into() });
/// ```
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one attempt.
    async fn run(&self, ctx: JobContext) -> HandlerOutcome;
}

#[async_trait]
impl<F, Fut> Handler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerOutcome> + Send,
{
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        (self)(ctx).await
    }
}

/// A handler with typed params and output; made by [`typed`].
pub struct Typed<P, O, F> {
    f: F,
    _types: PhantomData<fn(P) -> O>,
}

/// Wraps an async function taking the context and params of type `P` (read
/// from the job's JSON params with serde) and returning `O` (written as the
/// execution's output) into a [`Handler`]. Params that do not match `P` fail
/// the execution at once, without retries.
///
/// ```
/// use kairos_worker::{HandlerError, JobContext, Worker, typed};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize)]
/// struct Add { a: i64, b: i64 }
/// #[derive(Serialize)]
/// struct Sum { sum: i64 }
///
/// async fn add(ctx: JobContext, p: Add) -> Result<Sum, HandlerError> {
///     ctx.info(format!("adding {} and {}", p.a, p.b));
///     let sum = p.a.checked_add(p.b).ok_or_else(|| HandlerError::permanent("overflow"))?;
///     Ok(Sum { sum })
/// }
///
/// let builder = Worker::builder().handler("add", typed(add));
/// # let _ = builder;
/// ```
pub fn typed<P, O, F, Fut>(f: F) -> Typed<P, O, F>
where
    P: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, HandlerError>> + Send,
{
    Typed {
        f,
        _types: PhantomData,
    }
}

#[async_trait]
impl<P, O, F, Fut> Handler for Typed<P, O, F>
where
    P: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, HandlerError>> + Send,
{
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let params = match serde_json::from_value::<P>(ctx.params.clone()) {
            Ok(p) => p,
            Err(e) => return HandlerOutcome::PermanentFailure(format!("invalid params: {e}")),
        };
        match (self.f)(ctx, params).await {
            Ok(out) => match serde_json::to_value(out) {
                Ok(v) => HandlerOutcome::Success(v),
                Err(e) => HandlerOutcome::PermanentFailure(format!(
                    "handler output cannot be written as JSON: {e}"
                )),
            },
            Err(e) => e.into(),
        }
    }
}

/// Handlers by name. Sorted, so the "unknown handler" error lists them stably.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    handlers: BTreeMap<String, Arc<dyn Handler>>,
}

impl Registry {
    /// Adds or replaces a handler (a later registration wins, so built-ins can
    /// be overridden).
    pub(crate) fn insert(&mut self, name: String, handler: Arc<dyn Handler>) {
        self.handlers.insert(name, handler);
    }

    /// Removes a handler; whether it was there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        self.handlers.remove(name).is_some()
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn Handler>> {
        self.handlers.get(name).cloned()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    /// The names served, sorted (announced in heartbeats).
    pub(crate) fn names(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }

    /// The error reported for a dispatch naming a handler this worker lacks.
    pub(crate) fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        format!(
            "unknown handler {name:?}; this worker runs: {}",
            names.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    struct Echo;

    #[async_trait]
    impl Handler for Echo {
        async fn run(&self, ctx: JobContext) -> HandlerOutcome {
            HandlerOutcome::Success(ctx.params)
        }
    }

    fn ctx() -> JobContext {
        JobContext::detached("e", serde_json::json!({"a": 1}))
    }

    #[tokio::test]
    async fn closures_and_structs_are_handlers() {
        let mut r = Registry::default();
        r.insert("echo".into(), Arc::new(Echo));
        r.insert(
            "attempt".into(),
            Arc::new(|c: JobContext| async move { HandlerOutcome::Success(c.attempt.into()) }),
        );
        let echo = r.get("echo").unwrap().run(ctx()).await;
        assert_eq!(echo, HandlerOutcome::Success(serde_json::json!({"a": 1})));
        let attempt = r.get("attempt").unwrap().run(ctx()).await;
        assert_eq!(attempt, HandlerOutcome::Success(serde_json::json!(1)));
        assert_eq!(r.names(), vec!["attempt", "echo"]);
    }

    #[derive(Deserialize)]
    struct In {
        a: i64,
    }

    #[tokio::test]
    async fn typed_handlers_read_params_and_map_errors() {
        let double = typed(|_ctx, p: In| async move {
            if p.a < 0 {
                return Err(HandlerError::permanent("negative"));
            }
            if p.a == 0 {
                Err(std::io::Error::other("flaky"))?;
            }
            Ok(serde_json::json!({ "double": p.a * 2 }))
        });
        let run = |params| double.run(JobContext::detached("e", params));
        assert_eq!(
            run(serde_json::json!({"a": 2})).await,
            HandlerOutcome::Success(serde_json::json!({"double": 4}))
        );
        assert_eq!(
            run(serde_json::json!({"a": -1})).await,
            HandlerOutcome::PermanentFailure("negative".into())
        );
        assert_eq!(
            run(serde_json::json!({"a": 0})).await,
            HandlerOutcome::Failure("flaky".into())
        );
        assert!(matches!(
            run(serde_json::json!({"b": 1})).await,
            HandlerOutcome::PermanentFailure(m) if m.starts_with("invalid params")
        ));
    }

    #[test]
    fn unknown_handler_error_lists_what_runs() {
        let mut r = Registry::default();
        r.insert("b".into(), Arc::new(Echo));
        r.insert("a".into(), Arc::new(Echo));
        assert_eq!(
            r.unknown("x"),
            "unknown handler \"x\"; this worker runs: a, b"
        );
    }
}
