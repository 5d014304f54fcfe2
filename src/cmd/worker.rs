//! `kairos worker`: a worker with the built-in handlers, on RabbitMQ and Redis.

use crate::cli::WorkerArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::Result;
use kairos_core::connect;
use kairos_worker::Worker;
use std::sync::Arc;
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
    let mut builder = Worker::builder()
        .builtin_handlers()
        .broker(Arc::new(broker))
        .once_guard(Arc::new(guard))
        .names(names);
    if let Some(id) = pick(args.identity.worker_id, file.worker_id.clone()) {
        builder = builder.id(id);
    }
    if let Some(c) = pick(args.identity.worker_capacity, file.worker_capacity) {
        builder = builder.capacity(c);
    }
    let worker = builder.build()?;
    info!(worker = worker.id(), "worker starting");
    worker.run(crate::signal::shutdown_token()).await?;
    info!("worker stopped");
    Ok(())
}
