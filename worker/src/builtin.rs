//! The handlers every stock worker runs: `noop`, `sleep`, `fail` and `http`.

mod http;

use crate::handler::{HandlerOutcome, JobContext};
use async_trait::async_trait;
use std::time::Duration;

pub use http::HttpHandler;

/// `noop`: succeeds at once; the output is the params.
pub struct Noop;

#[async_trait]
impl crate::Handler for Noop {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        HandlerOutcome::Success(ctx.params)
    }
}

/// `sleep`: `{"ms": N}` waits N ms (stops early when cancelled); the output is
/// `{"sleptMs": N}`.
pub struct Sleep;

#[async_trait]
impl crate::Handler for Sleep {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let Some(ms) = ctx.params.get("ms").and_then(serde_json::Value::as_u64) else {
            return HandlerOutcome::PermanentFailure(
                "sleep handler: params.ms must be a non-negative integer (milliseconds)".into(),
            );
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                HandlerOutcome::Success(serde_json::json!({ "sleptMs": ms }))
            }
            _ = ctx.cancel.cancelled() => HandlerOutcome::failure("sleep handler: cancelled"),
        }
    }
}

/// `fail`: fails with `{"message": "…"}`, or "failed on purpose".
pub struct Fail;

#[async_trait]
impl crate::Handler for Fail {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let message = ctx
            .params
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("failed on purpose");
        HandlerOutcome::failure(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Handler;
    use serde_json::json;

    pub(super) fn ctx(params: serde_json::Value) -> JobContext {
        JobContext::detached("e", params)
    }

    #[tokio::test]
    async fn noop_returns_its_params() {
        let out = Noop.run(ctx(json!({"x": [1, 2]}))).await;
        assert_eq!(out, HandlerOutcome::Success(json!({"x": [1, 2]})));
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_sleeps_and_reports_it() {
        let out = Sleep.run(ctx(json!({"ms": 1500}))).await;
        assert_eq!(out, HandlerOutcome::Success(json!({"sleptMs": 1500})));
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_stops_when_cancelled() {
        let c = ctx(json!({"ms": 3_600_000}));
        let token = c.cancel.clone();
        let run = tokio::spawn(async move { Sleep.run(c).await });
        token.cancel();
        let out = run.await.unwrap();
        assert_eq!(out, HandlerOutcome::failure("sleep handler: cancelled"));
    }

    #[tokio::test]
    async fn sleep_rejects_bad_params() {
        for p in [
            json!({}),
            json!({"ms": -1}),
            json!({"ms": "10"}),
            json!(null),
        ] {
            let HandlerOutcome::PermanentFailure(e) = Sleep.run(ctx(p)).await else {
                panic!("bad params must fail, and no retry can help");
            };
            assert!(e.contains("params.ms"), "{e}");
        }
    }

    #[tokio::test]
    async fn fail_uses_the_message_or_a_default() {
        let out = Fail.run(ctx(json!({"message": "boom"}))).await;
        assert_eq!(out, HandlerOutcome::failure("boom"));
        let out = Fail.run(ctx(json!(null))).await;
        assert_eq!(out, HandlerOutcome::failure("failed on purpose"));
    }
}
