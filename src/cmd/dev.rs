//! `kairos dev`: the whole system in one process on embedded defaults —
//! SQLite (or the configured database), the in-process broker and lease, one
//! worker with the built-in handlers, and the callback relay.
//!
//! Shutdown runs in two phases so nothing is left unrecorded: first the API
//! and the leader stop and the worker drains (running handlers finish or are
//! reported for retry); then the result consumers and the relay stop.

use crate::config::commands::DevCmd;
use crate::config::required;
use anyhow::{Context, Result};
use kairos::embedded::{Embedded, WORKER_ID};
use tracing::info;

pub async fn run(cfg: DevCmd) -> Result<()> {
    let db_url = required(&cfg.db.database_url, "database_url")?.to_string();
    let addr = cfg.http.http_addr;
    cfg.worker.validate()?;
    cfg.reaper.validate()?;
    cfg.logs.validate()?;
    cfg.retention.validate()?;
    cfg.api.validate()?;
    let limits = cfg.budgets.limits().map_err(anyhow::Error::msg)?;
    let worker = cfg.worker;
    let shutdown = kairos::signal::shutdown_token();
    let running = Embedded::new()
        .database_url(db_url.clone())
        .http_addr(addr.clone())
        .worker(move |w| w.builtin_handlers().config(worker))
        .callback_secret(cfg.relay.callback_secret)
        .callback_allow_private(cfg.relay.callback_allow_private)
        .log_config(cfg.logs)
        .retention_config(cfg.retention)
        .reaper_config(cfg.reaper)
        .api_config(cfg.api)
        .run_limits(limits)
        .prometheus(kairos::ops::install_prometheus()?)
        .start(shutdown)
        .await
        .with_context(|| format!("cannot start kairos dev (API address {addr})"))?;
    print_banner(
        running.addr(),
        &db_url,
        running.admin_key(),
        running.key_file(),
        running.key_is_new(),
    );
    running.wait().await;
    info!("kairos dev stopped");
    Ok(())
}

fn print_banner(
    addr: std::net::SocketAddr,
    db_url: &str,
    key: &str,
    key_file: &std::path::Path,
    new_key: bool,
) {
    let origin = if new_key {
        "created now for tenant \"default\""
    } else {
        "tenant \"default\", kept from an earlier start"
    };
    println!(
        r#"
Kairos dev is running (API, dispatcher, worker "{WORKER_ID}", callback relay; in-process broker and lease).
  API:       http://{addr}   (docs: http://{addr}/docs)
  Dashboard: http://{addr}/ui   (log in with the admin key)
  Database:  {db}
  Admin key: {key}
             ({origin}; saved in {file})

Create a job:
  export KAIROS_KEY={key}
  curl -s -X POST http://{addr}/openapi/jobs -H "Authorization: Bearer $KAIROS_KEY" \
    -H 'Content-Type: application/json' \
    -d '{{"jobName":"hello","jobHandler":"noop","params":{{"greeting":"hi"}}}}'
Read it back:
  curl -s http://{addr}/openapi/jobs/<jobId> -H "Authorization: Bearer $KAIROS_KEY"

Press Ctrl-C to stop (running handlers finish first).
"#,
        db = kairos_core::redact::redact_url(db_url),
        file = key_file.display(),
    );
}
