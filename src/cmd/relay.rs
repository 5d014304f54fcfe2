//! `kairos callback-relay`: delivers callbacks from the outbox.

use crate::cli::RelayArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::Result;
use kairos::connect;
use kairos::ops::{self, StoreCheck, TasksCheck};
use kairos_api::ReadyCheck;
use kairos_callback_relay::{Relay, RelayConfig};
use kairos_core::supervise::CriticalTasks;
use std::sync::Arc;
use tokio::sync::Notify;
use tracing::info;

pub async fn run(args: RelayArgs, file: &FileSettings) -> Result<()> {
    let db_url = require(
        args.db.database_url,
        file.database_url.clone(),
        "KAIROS_DATABASE_URL",
    )?;
    let secret = require(
        args.callback.callback_secret,
        file.callback_secret.clone(),
        "KAIROS_CALLBACK_SECRET",
    )?;
    let store = Arc::new(connect::database(&db_url, false).await?);
    let shutdown = kairos::signal::shutdown_token();
    let tasks = CriticalTasks::new();
    let checks: Vec<Arc<dyn ReadyCheck>> = vec![
        Arc::new(StoreCheck(store.clone())),
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
    let owner = format!("relay-{}", uuid::Uuid::now_v7().simple());
    let mut cfg = RelayConfig::new(secret.into_bytes(), owner);
    cfg.allow_private = pick(
        args.callback.callback_allow_private,
        file.callback_allow_private,
    )
    .unwrap_or(false);
    info!(allow_private = cfg.allow_private, "callback relay starting");
    // Across processes the relay is woken by its poll; the notifier stays idle.
    Relay::new(store, cfg)?
        .critical_tasks(tasks)
        .run(shutdown, Arc::new(Notify::new()))
        .await?;
    info!("callback relay stopped");
    Ok(())
}
