//! `kairos dev`: the whole system in one process on embedded defaults —
//! SQLite (or the configured database), the in-process broker and lease, one
//! worker with the built-in handlers, and the callback relay.
//!
//! Shutdown runs in two phases so nothing is left unrecorded: first the API
//! and the leader stop and the worker drains (running handlers finish or are
//! reported for retry); then the result consumers and the relay stop.

use crate::cli::DevArgs;
use crate::settings::{FileSettings, pick};
use anyhow::{Context, Result};
use kairos::embedded::{DEV_SECRET, Embedded, WORKER_ID};
use kairos_dispatcher::reaper::ReaperConfig;
use tracing::info;

pub async fn run(args: DevArgs, file: &FileSettings) -> Result<()> {
    let db_url = pick(args.db.database_url, file.database_url.clone())
        .unwrap_or_else(|| "sqlite://kairos.db".into());
    let addr = pick(args.http.http_addr, file.http_addr.clone())
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let capacity = pick(args.identity.worker_capacity, file.worker_capacity);
    let attempt_key_ttl = super::attempt_key_ttl(&args.attempt_key, file)?;
    // Private addresses are allowed in dev: the jobs people try first call
    // services on their own machine.
    let allow_http =
        pick(args.http_guard.http_allow_private, file.http_allow_private).unwrap_or(true);
    let secret = pick(args.callback.callback_secret, file.callback_secret.clone())
        .unwrap_or_else(|| DEV_SECRET.into());
    let allow_private = pick(
        args.callback.callback_allow_private,
        file.callback_allow_private,
    )
    .unwrap_or(true);
    let mut reaper = ReaperConfig::default();
    super::dispatcher::recovery(&mut reaper, &args.recovery, file)?;
    let shutdown = kairos::signal::shutdown_token();
    let running = Embedded::new()
        .database_url(db_url.clone())
        .http_addr(addr.clone())
        .worker(move |w| {
            let w = w.builtin_handlers().http_allow_private(allow_http);
            let w = match capacity {
                Some(c) => w.capacity(c),
                None => w,
            };
            match attempt_key_ttl {
                Some(ttl) => w.attempt_key_ttl(ttl),
                None => w,
            }
        })
        .callback_secret(secret)
        .callback_allow_private(allow_private)
        .log_config(super::log_config(&args.logs, file)?)
        .reaper_config(reaper)
        .api_config(super::api_config(&args.limits, file)?)
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
