//! `kairos api`: the REST API against the configured database.

use crate::cli::ApiArgs;
use crate::settings::{FileSettings, pick, require};
use anyhow::{Context, Result};
use kairos::connect;
use kairos_api::AppState;
use kairos_coord_redis::RedisDue;
use std::sync::Arc;
use tracing::info;

pub async fn run(args: ApiArgs, file: &FileSettings) -> Result<()> {
    let db_url = require(
        args.db.database_url,
        file.database_url.clone(),
        "KAIROS_DATABASE_URL",
    )?;
    let addr = pick(args.http.http_addr, file.http_addr.clone())
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let store = connect::database(&db_url, false).await?;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (KAIROS_HTTP_ADDR)"))?;
    info!(addr = %listener.local_addr()?, "API listening");
    let shutdown = kairos::signal::shutdown_token();
    let config = super::api_config(&args.limits, file)?;
    let mut state = super::with_metrics(
        AppState::new(Arc::new(store), config),
        &args.limits,
        file,
        shutdown.clone(),
    )
    .await?;
    // With Redis, new and triggered jobs wake the leader at once; without it
    // they are picked up by the leader's next scan (at most 100 ms later).
    if let Some(redis_url) = pick(args.redis.redis_url, file.redis_url.clone()) {
        let due = RedisDue::connect(&redis_url, &super::names(&args.ns, file)).await?;
        state = state.with_due_notifier(kairos_api::due::merging_notifier(Arc::new(due)));
    }
    kairos::web::serve(listener, state, shutdown.cancelled_owned()).await?;
    info!("API stopped");
    Ok(())
}
