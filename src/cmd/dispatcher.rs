//! `kairos dispatcher`: one dispatcher instance against MySQL, Redis and RabbitMQ.

use crate::config::commands::DispatcherCmd;
use crate::config::required;
use anyhow::Result;
use kairos::connect;
use kairos::ops::{self, BrokerCheck, CoordCheck, StoreCheck, TasksCheck};
use kairos_api::ReadyCheck;
use kairos_coord_redis::RedisDue;
use kairos_core::supervise::CriticalTasks;
use kairos_dispatcher::Dispatcher;
use std::sync::Arc;
use tracing::info;

pub async fn run(cfg: DispatcherCmd) -> Result<()> {
    let db_url = required(&cfg.db.database_url, "database_url")?;
    let redis_url = required(&cfg.redis.redis_url, "redis_url")?;
    let amqp_url = required(&cfg.amqp.amqp_url, "amqp_url")?;
    cfg.dispatcher.validate()?;
    let limits = cfg.budgets.limits().map_err(anyhow::Error::msg)?;
    let names = cfg.ns.names();
    let store = connect::database(db_url, false)
        .await?
        .with_run_limits(limits);
    let broker =
        connect::rabbitmq(amqp_url, names.clone(), Some(&cfg.amqp.amqp_queue_type)).await?;
    let due = RedisDue::connect(redis_url, &names).await?;
    let mut dcfg = cfg.dispatcher;
    dcfg.names = names.clone();
    let coord = connect::redis(redis_url, names).await?;
    info!(
        balancer = dcfg.balancer.name(),
        lease_ttl_ms = dcfg.lease_ttl_ms,
        worker_dead_after_ms = dcfg.reaper.worker_dead_after_ms,
        default_timeout_ms = dcfg.reaper.default_timeout_ms,
        reconcile_grace_ms = dcfg.reaper.reconcile_grace_ms,
        dispatch_partitioned = dcfg.dispatch_partitioned,
        dispatch_max_rate = dcfg.dispatch_max_rate,
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
    ops::serve(
        cfg.metrics.metrics_addr,
        ops::install_prometheus()?,
        checks,
        shutdown.clone(),
    )
    .await?;
    Dispatcher::new(store.clone(), broker, coord.clone(), dcfg)
        .retention(store)
        .due_signal(Arc::new(due))
        .membership(coord)
        .critical_tasks(tasks)
        .run(shutdown)
        .await;
    info!("dispatcher stopped");
    Ok(())
}
