//! `kairos api`: the REST API against the configured database.

use crate::config::commands::ApiCmd;
use crate::config::required;
use anyhow::{Context, Result};
use kairos::connect;
use kairos_api::AppState;
use kairos_coord_redis::RedisDue;
use std::sync::Arc;
use tracing::info;

pub async fn run(cfg: ApiCmd) -> Result<()> {
    let db_url = required(&cfg.db.database_url, "database_url")?;
    cfg.api.validate()?;
    let limits = cfg.budgets.limits().map_err(anyhow::Error::msg)?;
    let addr = &cfg.http.http_addr;
    let store = connect::database(db_url, false)
        .await?
        .with_run_limits(limits);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (KAIROS_HTTP_ADDR)"))?;
    info!(addr = %listener.local_addr()?, "API listening");
    let shutdown = kairos::signal::shutdown_token();
    let mut state = super::with_metrics(
        AppState::new(Arc::new(store), cfg.api),
        cfg.metrics.metrics_addr,
        shutdown.clone(),
    )
    .await?;
    // With Redis, new and triggered jobs wake the leader at once; without it
    // they are picked up by the leader's next scan (at most 100 ms later).
    if let Some(redis_url) = &cfg.redis.redis_url {
        let due = RedisDue::connect(redis_url, &cfg.ns.names()).await?;
        state = state.with_due_notifier(kairos_api::due::merging_notifier(Arc::new(due)));
    }
    kairos::web::serve(listener, state, shutdown.cancelled_owned()).await?;
    info!("API stopped");
    Ok(())
}
