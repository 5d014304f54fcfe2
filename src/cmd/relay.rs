//! `kairos callback-relay`: delivers callbacks from the outbox.

use crate::cli::RelayArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::Result;
use kairos::connect;
use kairos_callback_relay::{Relay, RelayConfig};
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
    let store = connect::database(&db_url, false).await?;
    let owner = format!("relay-{}", uuid::Uuid::now_v7().simple());
    let mut cfg = RelayConfig::new(secret.into_bytes(), owner);
    cfg.allow_private = pick(
        args.callback.callback_allow_private,
        file.callback_allow_private,
    )
    .unwrap_or(false);
    info!(allow_private = cfg.allow_private, "callback relay starting");
    // Across processes the relay is woken by its poll; the notifier stays idle.
    Relay::new(Arc::new(store), cfg)?
        .run(kairos::signal::shutdown_token(), Arc::new(Notify::new()))
        .await?;
    info!("callback relay stopped");
    Ok(())
}
