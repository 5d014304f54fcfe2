//! `kairos dispatcher`: one dispatcher instance against MySQL, Redis and RabbitMQ.

use crate::cli::DispatcherArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::{Result, anyhow};
use kairos_core::connect;
use kairos_dispatcher::{Dispatcher, DispatcherConfig};
use std::sync::Arc;
use tracing::info;

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
    let names = super::names(&args.ns, file);
    let mut cfg = DispatcherConfig::default();
    if let Some(b) = pick(args.balancer, file.balancer.clone()) {
        cfg.strategy = b.parse().map_err(|e| anyhow!("KAIROS_BALANCER: {e}"))?;
    }
    let store = connect::database(&db_url, false).await?;
    let broker = connect::rabbitmq(&amqp_url, names.clone()).await?;
    let lock = connect::redis(&redis_url, names).await?;
    info!(balancer = ?cfg.strategy, "dispatcher starting");
    let shutdown = crate::signal::shutdown_token();
    Dispatcher::new(Arc::new(store), Arc::new(broker), Arc::new(lock), cfg)
        .run(shutdown)
        .await;
    info!("dispatcher stopped");
    Ok(())
}
