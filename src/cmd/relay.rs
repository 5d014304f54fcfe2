//! `kairos callback-relay`: delivers callbacks from the outbox.

use crate::config::commands::RelayCmd;
use crate::config::{missing, required};
use anyhow::Result;
use kairos::connect;
use kairos::ops::{self, StoreCheck, TasksCheck};
use kairos_api::ReadyCheck;
use kairos_callback_relay::Relay;
use kairos_core::supervise::CriticalTasks;
use std::sync::Arc;
use tokio::sync::Notify;
use tracing::info;

pub async fn run(cfg: RelayCmd) -> Result<()> {
    let db_url = required(&cfg.db.database_url, "database_url")?;
    if cfg.relay.callback_secret.is_empty() {
        return Err(missing("callback_secret"));
    }
    let store = Arc::new(connect::database(db_url, false).await?);
    let shutdown = kairos::signal::shutdown_token();
    let tasks = CriticalTasks::new();
    let checks: Vec<Arc<dyn ReadyCheck>> = vec![
        Arc::new(StoreCheck(store.clone())),
        Arc::new(TasksCheck(tasks.clone())),
    ];
    ops::serve(
        cfg.metrics.metrics_addr,
        ops::install_prometheus()?,
        checks,
        shutdown.clone(),
    )
    .await?;
    let mut relay = cfg.relay;
    relay.owner = format!("relay-{}", uuid::Uuid::now_v7().simple());
    info!(
        allow_private = relay.callback_allow_private,
        "callback relay starting"
    );
    // Across processes the relay is woken by its poll; the notifier stays idle.
    Relay::new(store, relay)?
        .critical_tasks(tasks)
        .run(shutdown, Arc::new(Notify::new()))
        .await?;
    info!("callback relay stopped");
    Ok(())
}
