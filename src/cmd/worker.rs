//! `kairos worker`: a worker with the built-in handlers, on RabbitMQ and Redis.

use crate::config::commands::WorkerCmd;
use crate::config::required;
use anyhow::{Result, bail};
use kairos::connect;
use kairos::ops::{self, BrokerCheck, CoordCheck, TasksCheck};
use kairos_api::ReadyCheck;
use kairos_core::supervise::CriticalTasks;
use kairos_worker::Worker;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub async fn run(cfg: WorkerCmd) -> Result<()> {
    let redis_url = required(&cfg.redis.redis_url, "redis_url")?;
    let amqp_url = required(&cfg.amqp.amqp_url, "amqp_url")?;
    cfg.worker.validate()?;
    let handlers = cfg
        .worker_handlers
        .as_deref()
        .map(handler_list)
        .transpose()?;
    let names = cfg.ns.names();
    let broker = Arc::new(
        connect::rabbitmq(amqp_url, names.clone(), Some(&cfg.amqp.amqp_queue_type)).await?,
    );
    let guard = Arc::new(connect::redis(redis_url, names.clone()).await?);
    // The worker's long-lived tasks (its dispatch intake among them).
    let tasks = CriticalTasks::new();
    let checks: Vec<Arc<dyn ReadyCheck>> = vec![
        Arc::new(BrokerCheck(broker.clone())),
        Arc::new(CoordCheck(guard.clone())),
        Arc::new(TasksCheck(tasks.clone())),
    ];
    let mut builder = Worker::builder()
        .builtin_handlers()
        .config(cfg.worker)
        .broker(broker)
        .coordination(guard)
        .names(names)
        .critical_tasks(tasks);
    if let Some(list) = handlers {
        builder = builder.only_handlers(list);
    }
    let worker = builder.build()?;
    info!(worker_id = worker.id(), handlers = ?worker.handlers(), "worker starting");
    let shutdown = kairos::signal::shutdown_token();
    // The endpoint outlives the drain: it stops when the process exits.
    let prometheus = ops::install_prometheus()?;
    ops::serve(
        cfg.metrics.metrics_addr,
        prometheus,
        checks,
        CancellationToken::new(),
    )
    .await?;
    worker.run(shutdown).await?;
    info!("worker stopped");
    Ok(())
}

/// `KAIROS_WORKER_HANDLERS`: comma-separated names, blanks ignored.
fn handler_list(list: &str) -> Result<Vec<String>> {
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        bail!("KAIROS_WORKER_HANDLERS names no handler (expected e.g. noop,sleep)");
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_lists_are_comma_separated() {
        assert_eq!(
            handler_list(" noop, sleep ,").unwrap(),
            vec!["noop", "sleep"]
        );
        assert!(handler_list(" , ").is_err());
    }
}
