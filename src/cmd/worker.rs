//! `kairos worker`: a worker with the built-in handlers, on RabbitMQ and Redis.

use crate::cli::WorkerArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::{Result, bail};
use kairos::connect;
use kairos::ops::{self, BrokerCheck, CoordCheck};
use kairos_api::ReadyCheck;
use kairos_worker::Worker;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub async fn run(args: WorkerArgs, file: &FileSettings) -> Result<()> {
    let redis_url = require(
        args.redis.redis_url,
        file.redis_url.clone(),
        "KAIROS_REDIS_URL",
    )?;
    let amqp_url = require(args.amqp.amqp_url, file.amqp_url.clone(), "KAIROS_AMQP_URL")?;
    let queue_type = pick(args.amqp.amqp_queue_type, file.amqp_queue_type.clone());
    let names = super::names(&args.ns, file);
    let broker =
        Arc::new(connect::rabbitmq(&amqp_url, names.clone(), queue_type.as_deref()).await?);
    let guard = Arc::new(connect::redis(&redis_url, names.clone()).await?);
    let checks: Vec<Arc<dyn ReadyCheck>> = vec![
        Arc::new(BrokerCheck(broker.clone())),
        Arc::new(CoordCheck(guard.clone())),
    ];
    let allow_private = pick(args.http_guard.http_allow_private, file.http_allow_private);
    let mut builder = Worker::builder()
        .builtin_handlers()
        .http_allow_private(allow_private.unwrap_or(false))
        .broker(broker)
        .coordination(guard)
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
    if let Some(n) = pick(args.worker_dispatch_batch, file.worker_dispatch_batch) {
        builder = builder.dispatch_batch(n);
    }
    if let Some(ms) = pick(args.worker_heartbeat_ms, file.worker_heartbeat_ms) {
        if ms == 0 {
            bail!("KAIROS_WORKER_HEARTBEAT_MS must be positive");
        }
        builder = builder.heartbeat_every(Duration::from_millis(ms));
    }
    if let Some(ttl) = super::attempt_key_ttl(&args.attempt_key, file)? {
        builder = builder.attempt_key_ttl(ttl);
    }
    if let Some(ms) = pick(args.worker_grace_ms, file.worker_grace_ms) {
        builder = builder.grace_period(Duration::from_millis(ms));
    }
    if let Some(list) = pick(args.worker_handlers, file.worker_handlers.clone()) {
        builder = builder.only_handlers(handler_list(&list)?);
    }
    if let Some(group) = pick(args.worker_group, file.worker_group.clone()) {
        builder = builder.group(group);
    }
    let worker = builder.build()?;
    info!(worker_id = worker.id(), handlers = ?worker.handlers(), "worker starting");
    let shutdown = kairos::signal::shutdown_token();
    // The endpoint outlives the drain: it stops when the process exits.
    let metrics_addr = pick(args.metrics.metrics_addr, file.metrics_addr.clone());
    let prometheus = ops::install_prometheus()?;
    ops::serve(metrics_addr, prometheus, checks, CancellationToken::new()).await?;
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

    #[test]
    fn attempt_key_ttls_under_a_minute_are_refused() {
        use crate::cli::AttemptKeyArg;
        let arg = |ms| AttemptKeyArg {
            worker_attempt_key_ttl_ms: ms,
        };
        let file = FileSettings::default();
        let ttl = |ms| super::super::attempt_key_ttl(&arg(ms), &file);
        assert_eq!(ttl(None).unwrap(), None);
        assert_eq!(
            ttl(Some(3_600_000)).unwrap(),
            Some(Duration::from_secs(3600))
        );
        let err = ttl(Some(59_999)).unwrap_err().to_string();
        assert!(err.contains("KAIROS_WORKER_ATTEMPT_KEY_TTL_MS"), "{err}");
        let from_file = FileSettings {
            worker_attempt_key_ttl_ms: Some(120_000),
            ..FileSettings::default()
        };
        assert_eq!(
            super::super::attempt_key_ttl(&arg(None), &from_file).unwrap(),
            Some(Duration::from_secs(120))
        );
    }
}
