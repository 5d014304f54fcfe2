//! Workflow nodes written with the `kairos-worker` SDK (issue 34): `report`
//! builds one report, and `mail` — the fan-in node — reads what its
//! parents produced through `ctx.parent_outputs()`.
//!
//! Runs the whole system embedded in this process on SQLite (as `kairos
//! dev` does), with these handlers beside the built-in ones:
//!
//! ```sh
//! cargo run --example workflow_worker     # prints an admin key and a workflow to create
//! ```
//!
//! Settings: `KAIROS_DATABASE_URL` (default `sqlite://workflow-worker.db`),
//! `KAIROS_HTTP_ADDR` (default `127.0.0.1:8080`).

use kairos::embedded::Embedded;
use kairos_worker::{HandlerError, HandlerOutcome, JobContext, WorkerBuilder};
use serde_json::{Value, json};

/// A report of `params.kind`: its row count stands in for the real work.
async fn report(ctx: JobContext) -> Result<Value, HandlerError> {
    let kind = ctx.params["kind"]
        .as_str()
        .ok_or_else(|| HandlerError::permanent("report: params.kind must be a string"))?;
    ctx.info(format!("building the {kind} report"));
    Ok(json!({"kind": kind, "rows": kind.len() * 100}))
}

/// The fan-in node: one mail listing every report its parents made.
async fn mail(ctx: JobContext) -> Result<Value, HandlerError> {
    let parents = ctx
        .parent_outputs()
        .and_then(Value::as_object)
        .ok_or_else(|| HandlerError::permanent("mail: runs as a workflow node with parents"))?;
    let mut lines: Vec<String> = parents
        .iter()
        .map(|(node, out)| format!("{node}: {} rows", out["rows"]))
        .collect();
    lines.sort();
    ctx.info(format!("mailing {} reports", lines.len()));
    Ok(json!({"sent": lines}))
}

/// A handler's result as the outcome the worker reports.
fn outcome(r: Result<Value, HandlerError>) -> HandlerOutcome {
    r.map_or_else(HandlerOutcome::from, HandlerOutcome::Success)
}

fn handlers(w: WorkerBuilder) -> WorkerBuilder {
    w.handler("report", |ctx: JobContext| async move {
        outcome(report(ctx).await)
    })
    .handler(
        "mail",
        |ctx: JobContext| async move { outcome(mail(ctx).await) },
    )
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAIROS_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let shutdown = kairos::signal::shutdown_token();
    let running = Embedded::new()
        .database_url(
            env("KAIROS_DATABASE_URL").unwrap_or_else(|| "sqlite://workflow-worker.db".into()),
        )
        .http_addr(env("KAIROS_HTTP_ADDR").unwrap_or_else(|| "127.0.0.1:8080".into()))
        .worker(|w| handlers(w.builtin_handlers()))
        .start(shutdown)
        .await?;
    let addr = running.addr();
    let key = running.admin_key();
    println!(
        "Kairos embedded at http://{addr} (Ctrl-C to stop)\n\
         admin key: {key}\n\
         try:\n  curl -s -X POST http://{addr}/openapi/workflows -H \"Authorization: Bearer {key}\" \
         -H 'Content-Type: application/json' -d '{{\"name\":\"nightly\",\"nodes\":[\
         {{\"id\":\"export\",\"handler\":\"noop\"}},\
         {{\"id\":\"sales\",\"handler\":\"report\",\"params\":{{\"kind\":\"sales\"}}}},\
         {{\"id\":\"stock\",\"handler\":\"report\",\"params\":{{\"kind\":\"stock\"}}}},\
         {{\"id\":\"churn\",\"handler\":\"report\",\"params\":{{\"kind\":\"churn\"}}}},\
         {{\"id\":\"mail\",\"handler\":\"mail\"}}],\"edges\":[\
         {{\"from\":\"export\",\"to\":\"sales\"}},{{\"from\":\"export\",\"to\":\"stock\"}},\
         {{\"from\":\"export\",\"to\":\"churn\"}},{{\"from\":\"sales\",\"to\":\"mail\"}},\
         {{\"from\":\"stock\",\"to\":\"mail\"}},{{\"from\":\"churn\",\"to\":\"mail\"}}]}}'\n  \
         then GET /openapi/workflows/<id>/runs/<runId> for the nodes, or open http://{addr}/ui/workflows"
    );
    running.wait().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_mail_lists_every_parent_report() {
        let ctx = JobContext::detached("e", Value::Null).with_parent_outputs(json!({
            "stock": {"kind": "stock", "rows": 500}, "sales": {"kind": "sales", "rows": 500}
        }));
        let out = mail(ctx).await.unwrap();
        assert_eq!(out["sent"], json!(["sales: 500 rows", "stock: 500 rows"]));
        let root = JobContext::detached("e", Value::Null);
        assert!(!mail(root).await.unwrap_err().is_retryable());
    }
}
