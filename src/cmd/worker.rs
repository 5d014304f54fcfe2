//! `kairos worker`: a worker with the built-in handlers, on RabbitMQ and Redis.

use crate::cli::WorkerArgs;
use crate::connect;
use crate::settings::{FileSettings, pick, require};
use anyhow::{Result, bail};
use kairos_worker::Worker;
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

pub async fn run(args: WorkerArgs, file: &FileSettings) -> Result<()> {
    let redis_url = require(
        args.redis.redis_url,
        file.redis_url.clone(),
        "KAIROS_REDIS_URL",
    )?;
    let amqp_url = require(args.amqp.amqp_url, file.amqp_url.clone(), "KAIROS_AMQP_URL")?;
    let names = super::names(&args.ns, file);
    let broker = connect::rabbitmq(&amqp_url, names.clone()).await?;
    let guard = connect::redis(&redis_url, names.clone()).await?;
    let allow_private = pick(args.http_guard.http_allow_private, file.http_allow_private);
    let mut builder = Worker::builder()
        .builtin_handlers()
        .http_allow_private(allow_private.unwrap_or(false))
        .broker(Arc::new(broker))
        .coordination(Arc::new(guard))
        .names(names);
    if let Some(id) = pick(args.identity.worker_id, file.worker_id.clone()) {
        builder = builder.id(id);
    }
    if let Some(c) = pick(args.identity.worker_capacity, file.worker_capacity) {
        builder = builder.capacity(c);
    }
    if let Some(b) = pick(args.worker_buffer, file.worker_buffer) {
        builder = builder.buffer(b);
    }
    if let Some(ms) = pick(args.worker_heartbeat_ms, file.worker_heartbeat_ms) {
        if ms == 0 {
            bail!("KAIROS_WORKER_HEARTBEAT_MS must be positive");
        }
        builder = builder.heartbeat_every(Duration::from_millis(ms));
    }
    if let Some(ms) = pick(args.worker_grace_ms, file.worker_grace_ms) {
        builder = builder.grace_period(Duration::from_millis(ms));
    }
    let worker = builder.build()?;
    info!(worker = worker.id(), "worker starting");
    worker.run(crate::signal::shutdown_token()).await?;
    info!("worker stopped");
    Ok(())
}
