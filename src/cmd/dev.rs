//! `kairos dev`: the whole system in one process on embedded defaults —
//! SQLite (or the configured database), the in-process broker and lease, one
//! worker with the built-in handlers, and the callback relay.
//!
//! Shutdown runs in two phases so nothing is left unrecorded: first the API
//! and the leader stop and the worker drains (running handlers finish or are
//! reported for retry); then the result consumers and the relay stop.

use crate::cli::DevArgs;
use crate::connect;
use crate::settings::{FileSettings, pick};
use anyhow::{Context, Result};
use kairos_api::AppState;
use kairos_callback_relay::{Relay, RelayConfig};
use kairos_core::protocol::Names;
use kairos_core::store::Store;
use kairos_core::supervise::spawn_critical;
use kairos_dispatcher::{Dispatcher, DispatcherConfig, reaper};
use kairos_inproc::MemoryBroker;
use kairos_inproc::MemoryCoord;
use kairos_inproc::MemoryDue;
use kairos_worker::Worker;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The embedded worker's id. Stable across restarts, so work it held when the
/// previous run stopped can be found and retried.
const DEV_WORKER: &str = "dev-worker";
/// Secret used when KAIROS_CALLBACK_SECRET is not set (dev only).
const DEV_SECRET: &str = "kairos-dev-secret";

pub async fn run(args: DevArgs, file: &FileSettings) -> Result<()> {
    let db_url = pick(args.db.database_url, file.database_url.clone())
        .unwrap_or_else(|| "sqlite://kairos.db".into());
    let addr = pick(args.http.http_addr, file.http_addr.clone())
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let store: Arc<dyn Store> = Arc::new(connect::database(&db_url, true).await?);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| {
            format!("cannot listen on {addr} (set KAIROS_HTTP_ADDR to another address)")
        })?;
    let local = listener.local_addr()?;
    let names = Names::default();
    let coord = Arc::new(MemoryCoord::new());
    let attempts = reaper::Attempts {
        coord: coord.clone(),
        names: names.clone(),
    };
    recover_interrupted(store.as_ref(), &attempts).await;
    let (key, key_file, new_key) = super::dev_key::ensure(store.as_ref(), &db_url).await?;

    let broker = Arc::new(MemoryBroker::new(names.clone()));
    let relay_wake = Arc::new(Notify::new());
    let due = Arc::new(MemoryDue::new());
    let mut cfg = DispatcherConfig {
        names: names.clone(),
        ..DispatcherConfig::default()
    };
    super::dispatcher::recovery(&mut cfg.reaper, &args.recovery, file)?;
    let dispatcher = Dispatcher::new(store.clone(), broker.clone(), coord.clone(), cfg)
        .notify_terminal(relay_wake.clone())
        .due_signal(due.clone());
    let mut worker = Worker::builder()
        .id(DEV_WORKER)
        .builtin_handlers()
        .http_allow_private(
            pick(args.http_guard.http_allow_private, file.http_allow_private).unwrap_or(true),
        )
        .broker(broker.clone())
        .coordination(coord.clone())
        .names(names);
    if let Some(c) = pick(args.identity.worker_capacity, file.worker_capacity) {
        worker = worker.capacity(c);
    }
    let worker = worker.build()?;
    let secret = pick(args.callback.callback_secret, file.callback_secret.clone())
        .unwrap_or_else(|| DEV_SECRET.into());
    let mut relay_cfg = RelayConfig::new(secret.into_bytes(), "dev-relay");
    relay_cfg.allow_private = pick(
        args.callback.callback_allow_private,
        file.callback_allow_private,
    )
    .unwrap_or(true);
    let relay = Relay::new(store.clone(), relay_cfg)?;
    let front = crate::signal::shutdown_token();
    let state = super::with_metrics(
        AppState::new(store.clone(), super::api_config(&args.limits, file)?),
        &args.limits,
        file,
        front.clone(),
    )
    .await?
    .with_ready_check(Arc::new(crate::ops::BrokerCheck(broker.clone())))
    .with_ready_check(Arc::new(crate::ops::CoordCheck(coord.clone())))
    .with_due_notifier(super::announce_due(due));

    let back = CancellationToken::new();
    // One process, four services: a panic in any of them stops the process
    // rather than leave the others running without it.
    let api = spawn_critical(
        "api",
        kairos_api::serve(listener, state, front.clone().cancelled_owned()),
    );
    let dispatcher = spawn_critical(
        "dispatcher",
        dispatcher.run_until(front.clone(), back.clone()),
    );
    let worker = spawn_critical("worker", worker.run(front.clone()));
    let relay = spawn_critical("callback relay", relay.run(back.clone(), relay_wake));
    print_banner(local, &db_url, &key, &key_file, new_key);

    front.cancelled().await;
    match worker.await {
        Ok(Ok(())) => info!("worker drained"),
        Ok(Err(e)) => warn!(error = %e, "worker stopped with an error"),
        Err(e) => warn!(error = %e, "worker task failed"),
    }
    back.cancel();
    let _ = dispatcher.await;
    if let Ok(Err(e)) = relay.await {
        warn!(error = %e, "callback relay stopped with an error");
    }
    if let Ok(Err(e)) = api.await {
        warn!(error = %e, "API stopped with an error");
    }
    info!("kairos dev stopped");
    Ok(())
}

/// Attempts the embedded worker held when the previous run ended abruptly
/// (killed, power loss) can never report: their broker lived in memory. They
/// are rescued like a dead worker's: unstarted ones are published again,
/// started ones are lost and retried if the job allows.
async fn recover_interrupted(store: &dyn Store, attempts: &reaper::Attempts) {
    let reason = "kairos dev stopped while this attempt was in flight";
    match reaper::rescue_work_of(store, attempts, DEV_WORKER, reason).await {
        Ok(r) if r.requeued > 0 || r.lost > 0 => {
            info!(
                requeued = r.requeued,
                lost = r.lost,
                "recovered executions interrupted by the previous run"
            )
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot recover interrupted executions"),
    }
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
Kairos dev is running (API, dispatcher, worker "{DEV_WORKER}", callback relay; in-process broker and lease).
  API:       http://{addr}   (docs: http://{addr}/docs)
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
