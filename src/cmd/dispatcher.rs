//! `kairos dispatcher`: one dispatcher instance against MySQL, Redis and RabbitMQ.

use super::at_least;
use crate::cli::{DispatcherArgs, RecoveryArgs};
use crate::settings::{FileSettings, pick, require};
use anyhow::{Result, anyhow};
use kairos::connect;
use kairos::ops::{self, BrokerCheck, CoordCheck, StoreCheck, TasksCheck};
use kairos_api::ReadyCheck;
use kairos_coord_redis::RedisDue;
use kairos_core::supervise::CriticalTasks;
use kairos_dispatcher::{Dispatcher, DispatcherConfig};
use std::sync::Arc;
use tracing::info;

/// Shorter leases renew so often that a busy box would lose them to latency.
const MIN_LEASE_TTL_MS: u64 = 500;
/// A shorter threshold would declare healthy workers dead between heartbeats.
const MIN_DEAD_AFTER_MS: u64 = 1000;

pub async fn run(args: DispatcherArgs, file: &FileSettings) -> Result<()> {
    let db_url = require(
        args.db.database_url,
        file.database_url.clone(),
        "KAIROS_DATABASE_URL",
    )?;
    let redis_url = require(
        args.redis.redis_url,
        file.redis_url.clone(),
        "KAIROS_REDIS_URL",
    )?;
    let amqp_url = require(args.amqp.amqp_url, file.amqp_url.clone(), "KAIROS_AMQP_URL")?;
    let queue_type = pick(args.amqp.amqp_queue_type, file.amqp_queue_type.clone());
    let names = super::names(&args.ns, file);
    let mut cfg = DispatcherConfig::default();
    if let Some(b) = pick(args.balancer, file.balancer.clone()) {
        cfg.strategy = b.parse().map_err(|e| anyhow!("KAIROS_BALANCER: {e}"))?;
    }
    if let Some(ms) = pick(args.lease_ttl_ms, file.lease_ttl_ms) {
        cfg.lease_ttl = at_least(ms, MIN_LEASE_TTL_MS, "KAIROS_LEASE_TTL_MS")?;
    }
    if let Some(ms) = pick(args.worker_dead_after_ms, file.worker_dead_after_ms) {
        cfg.reaper.dead_after = at_least(ms, MIN_DEAD_AFTER_MS, "KAIROS_WORKER_DEAD_AFTER_MS")?;
    }
    cfg.logs = super::log_config(&args.logs, file)?;
    recovery(&mut cfg.reaper, &args.recovery, file)?;
    let store = connect::database(&db_url, false).await?;
    let broker = connect::rabbitmq(&amqp_url, names.clone(), queue_type.as_deref()).await?;
    let due = RedisDue::connect(&redis_url, &names).await?;
    cfg.names = names.clone();
    let coord = connect::redis(&redis_url, names).await?;
    info!(
        balancer = ?cfg.strategy,
        lease_ttl = ?cfg.lease_ttl,
        worker_dead_after = ?cfg.reaper.dead_after,
        default_timeout = ?cfg.reaper.default_timeout,
        reconcile_grace = ?cfg.reaper.reconcile_grace,
        "dispatcher starting"
    );
    let store = Arc::new(store);
    let broker = Arc::new(broker);
    let coord = Arc::new(coord);
    let shutdown = kairos::signal::shutdown_token();
    let tasks = CriticalTasks::new();
    let checks: Vec<Arc<dyn ReadyCheck>> = vec![
        Arc::new(StoreCheck(store.clone())),
        Arc::new(BrokerCheck(broker.clone())),
        Arc::new(CoordCheck(coord.clone())),
        Arc::new(TasksCheck(tasks.clone())),
    ];
    let metrics_addr = pick(args.metrics.metrics_addr, file.metrics_addr.clone());
    ops::serve(
        metrics_addr,
        ops::install_prometheus()?,
        checks,
        shutdown.clone(),
    )
    .await?;
    Dispatcher::new(store, broker, coord, cfg)
        .due_signal(Arc::new(due))
        .critical_tasks(tasks)
        .run(shutdown)
        .await;
    info!("dispatcher stopped");
    Ok(())
}

/// Applies `KAIROS_DEFAULT_TIMEOUT_MS` and `KAIROS_RECONCILE_GRACE_MS`.
pub fn recovery(
    reaper: &mut kairos_dispatcher::reaper::ReaperConfig,
    args: &RecoveryArgs,
    file: &FileSettings,
) -> Result<()> {
    if let Some(ms) = pick(args.default_timeout_ms, file.default_timeout_ms) {
        reaper.default_timeout = at_least(ms, 1000, "KAIROS_DEFAULT_TIMEOUT_MS")?;
    }
    if let Some(ms) = pick(args.reconcile_grace_ms, file.reconcile_grace_ms) {
        reaper.reconcile_grace = at_least(ms, 1000, "KAIROS_RECONCILE_GRACE_MS")?;
    }
    Ok(())
}
