//! What a handler is: the [`Handler`] trait, the [`JobContext`] it receives,
//! the closed [`HandlerOutcome`] it returns, and the registry of named handlers.

use async_trait::async_trait;
use kairos_core::time::Millis;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a handler knows about the attempt it runs.
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
    /// The job's params, as submitted.
    pub params: serde_json::Value,
    /// Cancelled when the attempt timed out or the worker shuts down: the
    /// result is already being reported, so stop and release resources.
    pub cancel: CancellationToken,
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
}

impl HandlerOutcome {
    /// A failure from anything printable.
    pub fn failure(e: impl std::fmt::Display) -> Self {
        HandlerOutcome::Failure(e.to_string())
    }
}

/// Code a worker can run for a named job handler.
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

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn Handler>> {
        self.handlers.get(name).cloned()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
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

    struct Echo;

    #[async_trait]
    impl Handler for Echo {
        async fn run(&self, ctx: JobContext) -> HandlerOutcome {
            HandlerOutcome::Success(ctx.params)
        }
    }

    fn ctx() -> JobContext {
        JobContext {
            execution_id: "e".into(),
            job_id: "j".into(),
            attempt: 1,
            scheduled_at: 0,
            params: serde_json::json!({"a": 1}),
            cancel: CancellationToken::new(),
        }
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
