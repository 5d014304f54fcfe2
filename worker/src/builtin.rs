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
/// `{"sleptMs": N}`. With `"logEveryMs": M` it also writes a log line at the
/// start and every M ms (to watch a running execution's log).
pub struct Sleep;

#[async_trait]
impl crate::Handler for Sleep {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let Some(ms) = ctx.params.get("ms").and_then(serde_json::Value::as_u64) else {
            return HandlerOutcome::PermanentFailure(
                "sleep handler: params.ms must be a non-negative integer (milliseconds)".into(),
            );
        };
        let every = ctx
            .params
            .get("logEveryMs")
            .and_then(serde_json::Value::as_u64)
            .filter(|e| *e > 0);
        let done = tokio::time::Instant::now() + Duration::from_millis(ms);
        let mut slept = 0;
        if every.is_some() {
            ctx.info(format!("sleeping {ms} ms"));
        }
        loop {
            let step = every.map_or(ms - slept, |e| e.min(ms - slept));
            let until = (tokio::time::Instant::now() + Duration::from_millis(step)).min(done);
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = ctx.cancel.cancelled() => return HandlerOutcome::failure("sleep handler: cancelled"),
            }
            slept += step;
            if slept >= ms {
                break;
            }
            ctx.info(format!("slept {slept} of {ms} ms"));
        }
        if every.is_some() {
            ctx.info(format!("slept {ms} ms"));
        }
        HandlerOutcome::Success(serde_json::json!({ "sleptMs": ms }))
    }
}

/// `fail`: fails with `{"message": "…"}`, or "failed on purpose", and writes
/// the message to the execution's log as an `error` line.
pub struct Fail;

#[async_trait]
impl crate::Handler for Fail {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let message = ctx
            .params
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("failed on purpose");
        ctx.error(format!("attempt {}: {message}", ctx.attempt));
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
    async fn sleep_with_log_lines_takes_the_same_time() {
        let start = tokio::time::Instant::now();
        let out = Sleep
            .run(ctx(json!({"ms": 2500, "logEveryMs": 1000})))
            .await;
        assert_eq!(out, HandlerOutcome::Success(json!({"sleptMs": 2500})));
        assert_eq!(start.elapsed(), Duration::from_millis(2500));
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
