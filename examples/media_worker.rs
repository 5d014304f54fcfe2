//! A worker service with two handlers of its own, written with the
//! `kairos-worker` SDK: `thumbnail` (typed params and output, permanent
//! errors for bad input) and `report` (long-running: logs lines, reports
//! progress, stops when cancelled).
//!
//! Run it on its own — the whole system embedded in this process on SQLite,
//! as `kairos dev` does, with these handlers registered beside the built-in
//! ones; no services needed:
//!
//! ```sh
//! cargo run --example media_worker     # prints an admin key, kept in media-worker.db.key
//! export KAIROS_KEY=$(cat media-worker.db.key)
//! curl -s -X POST http://127.0.0.1:8080/openapi/jobs -H "Authorization: Bearer $KAIROS_KEY" \
//!   -H 'Content-Type: application/json' \
//!   -d '{"jobName":"q3","jobHandler":"report","params":{"rows":20,"rowMs":100}}'
//! curl -s http://127.0.0.1:8080/openapi/executions/<executionId>/logs -H "Authorization: Bearer $KAIROS_KEY"
//! ```
//!
//! Or as a worker against the services stack (API, dispatchers on MySQL,
//! Redis, RabbitMQ), serving only these two handlers:
//!
//! ```sh
//! KAIROS_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//! KAIROS_REDIS_URL=redis://127.0.0.1:6379/0 \
//!   cargo run --example media_worker
//! ```
//!
//! Settings: `KAIROS_DATABASE_URL` (embedded; default
//! `sqlite://media-worker.db`), `KAIROS_HTTP_ADDR` (embedded; default
//! `127.0.0.1:8080`), `KAIROS_NAMESPACE`, `KAIROS_WORKER_ID`,
//! `KAIROS_WORKER_GROUP`, `KAIROS_WORKER_HEARTBEAT_MS`,
//! `KAIROS_AMQP_QUEUE_TYPE` (services).

use kairos::embedded::Embedded;
use kairos_core::protocol::Names;
use kairos_worker::{HandlerError, JobContext, Worker, WorkerBuilder, typed};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// `thumbnail` params: the source image's size and the longest edge wanted.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThumbnailParams {
    width: u32,
    height: u32,
    #[serde(default = "default_edge")]
    max_edge: u32,
}

fn default_edge() -> u32 {
    256
}

/// `thumbnail` output: the size to render at.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Thumbnail {
    width: u32,
    height: u32,
    scale: f64,
}

/// Fits the image into `max_edge` keeping its aspect ratio (never upscales).
async fn thumbnail(ctx: JobContext, p: ThumbnailParams) -> Result<Thumbnail, HandlerError> {
    if p.width == 0 || p.height == 0 || p.max_edge == 0 {
        // No retry will make a zero-sized image valid.
        return Err(HandlerError::permanent(format!(
            "cannot scale a {}x{} image to {} px",
            p.width, p.height, p.max_edge
        )));
    }
    let longest = p.width.max(p.height);
    let scale = (f64::from(p.max_edge) / f64::from(longest)).min(1.0);
    let size = |v: u32| ((f64::from(v) * scale).round() as u32).max(1);
    let out = Thumbnail {
        width: size(p.width),
        height: size(p.height),
        scale,
    };
    ctx.info(format!(
        "{}x{} -> {}x{}",
        p.width, p.height, out.width, out.height
    ));
    Ok(out)
}

/// `report` params: how many rows, and how long each takes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReportParams {
    rows: u32,
    #[serde(default)]
    row_ms: u64,
}

/// `report` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    rows: u32,
    checksum: u64,
    attempt: u32,
}

/// Works through the rows, logging each and reporting progress; stops early
/// (with a retryable error) when the attempt is cancelled or times out.
async fn report(ctx: JobContext, p: ReportParams) -> Result<Report, HandlerError> {
    if p.rows == 0 {
        return Err(HandlerError::permanent("a report needs at least one row"));
    }
    ctx.info(format!("building a report of {} rows", p.rows));
    let mut checksum = 0u64;
    for row in 1..=p.rows {
        tokio::select! {
            _ = ctx.cancelled() => {
                ctx.warn(format!("stopped at row {row}"));
                return Err(HandlerError::retryable("report stopped before it was complete"));
            }
            _ = tokio::time::sleep(Duration::from_millis(p.row_ms)) => {}
        }
        checksum = checksum.wrapping_mul(31).wrapping_add(u64::from(row));
        ctx.info(format!("row {row}/{}", p.rows));
        ctx.progress(f64::from(row) * 100.0 / f64::from(p.rows));
    }
    Ok(Report {
        rows: p.rows,
        checksum,
        attempt: ctx.attempt,
    })
}

/// Registers this service's handlers.
fn handlers(w: WorkerBuilder) -> WorkerBuilder {
    w.handler("thumbnail", typed(thumbnail))
        .handler("report", typed(report))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAIROS_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn,lapin=warn".into()),
        )
        .init();
    let shutdown = kairos::signal::shutdown_token();
    match (env("KAIROS_AMQP_URL"), env("KAIROS_REDIS_URL")) {
        (Some(amqp), Some(redis)) => {
            let names = Names::new(env("KAIROS_NAMESPACE").unwrap_or_else(|| "kairos".into()));
            let queue_type = env("KAIROS_AMQP_QUEUE_TYPE");
            let broker =
                kairos::connect::rabbitmq(&amqp, names.clone(), queue_type.as_deref()).await?;
            let coord = kairos::connect::redis(&redis, names.clone()).await?;
            let mut builder = handlers(Worker::builder())
                .broker(Arc::new(broker))
                .coordination(Arc::new(coord))
                .names(names);
            if let Some(id) = env("KAIROS_WORKER_ID") {
                builder = builder.id(id);
            }
            if let Some(group) = env("KAIROS_WORKER_GROUP") {
                builder = builder.group(group);
            }
            // As `kairos worker`: heartbeats must come well within the
            // dispatchers' KAIROS_WORKER_DEAD_AFTER_MS.
            if let Some(ms) = env("KAIROS_WORKER_HEARTBEAT_MS") {
                let ms: u64 = ms
                    .parse()
                    .map_err(|e| format!("KAIROS_WORKER_HEARTBEAT_MS={ms:?}: {e}"))?;
                builder = builder.heartbeat_every(Duration::from_millis(ms));
            }
            let worker = builder.build()?;
            println!(
                "media worker {} serving {:?} (Ctrl-C to stop)",
                worker.id(),
                worker.handlers()
            );
            worker.run(shutdown).await?;
        }
        (None, None) => {
            let running = Embedded::new()
                .database_url(
                    env("KAIROS_DATABASE_URL").unwrap_or_else(|| "sqlite://media-worker.db".into()),
                )
                .http_addr(env("KAIROS_HTTP_ADDR").unwrap_or_else(|| "127.0.0.1:8080".into()))
                .worker(|w| handlers(w.builtin_handlers()))
                .start(shutdown)
                .await?;
            let addr = running.addr();
            let key = running.admin_key();
            println!(
                "Kairos embedded at http://{addr} with handlers {:?} (Ctrl-C to stop)\n\
                 admin key: {key} (kept in {})\n\
                 try:\n  export KAIROS_KEY={key}\n  \
                 curl -s -X POST http://{addr}/openapi/jobs -H \"Authorization: Bearer $KAIROS_KEY\" \
                 -H 'Content-Type: application/json' \
                 -d '{{\"jobName\":\"thumb\",\"jobHandler\":\"thumbnail\",\"params\":{{\"width\":4000,\"height\":3000}}}}'",
                running.handlers(),
                running.key_file().display(),
            );
            running.wait().await;
        }
        _ => return Err("set both KAIROS_AMQP_URL and KAIROS_REDIS_URL, or neither".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn thumbnails_keep_the_aspect_ratio_and_never_upscale() {
        let ctx = || JobContext::detached("e", serde_json::Value::Null);
        let t = thumbnail(
            ctx(),
            ThumbnailParams {
                width: 4000,
                height: 3000,
                max_edge: 400,
            },
        )
        .await
        .unwrap();
        assert_eq!((t.width, t.height), (400, 300));
        let small = thumbnail(
            ctx(),
            ThumbnailParams {
                width: 100,
                height: 50,
                max_edge: 400,
            },
        )
        .await
        .unwrap();
        assert_eq!((small.width, small.height, small.scale), (100, 50, 1.0));
        let bad = thumbnail(
            ctx(),
            ThumbnailParams {
                width: 0,
                height: 50,
                max_edge: 400,
            },
        )
        .await;
        assert!(!bad.unwrap_err().is_retryable());
    }

    #[tokio::test]
    async fn reports_count_their_rows() {
        let ctx = JobContext::detached("e", serde_json::Value::Null);
        let r = report(ctx, ReportParams { rows: 3, row_ms: 0 })
            .await
            .unwrap();
        assert_eq!(r.rows, 3);
        assert_eq!(r.checksum, (31 + 2) * 31 + 3);
    }
}
