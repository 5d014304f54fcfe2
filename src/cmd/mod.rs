//! One module per subcommand; each loads its config once
//! ([`crate::config::load`]), connects what it needs, runs until a signal,
//! and shuts down cleanly.

mod api;
mod bench;
mod dev;
mod dispatcher;
mod keys;
mod migrate;
mod relay;
mod tenants;
mod worker;

use crate::cli::{Cli, Command, ConfigCommand, DatabaseArg, Process};
use crate::config::commands::{ApiCmd, DatabaseCmd, DevCmd, DispatcherCmd, RelayCmd, WorkerCmd};
use crate::config::{self, load, render};
use anyhow::Result;
use std::path::Path;

/// Runs the chosen subcommand.
pub async fn run(cli: Cli) -> Result<()> {
    let file = cli.config.as_deref();
    match cli.command {
        Command::Migrate(args) => migrate::run(load(file, &args)?).await,
        Command::Api(args) => api::run(load(file, &args)?).await,
        Command::Dispatcher(args) => dispatcher::run(load(file, &args)?).await,
        Command::Worker(args) => worker::run(load(file, &args)?).await,
        Command::CallbackRelay(args) => relay::run(load(file, &args)?).await,
        Command::Dev(args) => dev::run(load(file, &args)?).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Tenants(cmd) => tenants::run(cmd, file).await,
        Command::Keys(cmd) => keys::run(cmd, file).await,
        Command::Config(ConfigCommand::Print(process)) => {
            print!("{}", print(process, file)?);
            Ok(())
        }
    }
}

/// The effective settings of `process`, as `kairos config print` shows them.
fn print(process: Process, file: Option<&Path>) -> Result<String> {
    match process {
        Process::Api(a) => render(&load::<ApiCmd>(file, &a)?),
        Process::Dispatcher(a) => render(&load::<DispatcherCmd>(file, &a)?),
        Process::Worker(a) => render(&load::<WorkerCmd>(file, &a)?),
        Process::CallbackRelay(a) => render(&load::<RelayCmd>(file, &a)?),
        Process::Dev(a) => render(&load::<DevCmd>(file, &a)?),
    }
}

/// [`print`], for the config tests.
#[cfg(test)]
pub(crate) fn print_for_test(process: Process, file: Option<&Path>) -> Result<String> {
    print(process, file)
}

/// The database URL of a management command.
fn database_url(db: &DatabaseArg, file: Option<&Path>) -> Result<String> {
    let cfg: DatabaseCmd = load(file, db)?;
    Ok(config::required(&cfg.db.database_url, "database_url")?.to_string())
}

/// `state` with `/metrics` served: on the API's listener, or on its own at
/// `KAIROS_METRICS_ADDR` (then the API's `/metrics` is 404).
async fn with_metrics(
    state: kairos_api::AppState,
    metrics_addr: Option<String>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<kairos_api::AppState> {
    let handle = kairos::ops::install_prometheus()?;
    let Some(addr) = metrics_addr else {
        return Ok(state.with_prometheus(handle));
    };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (KAIROS_METRICS_ADDR): {e}"))?;
    tracing::info!(addr = %listener.local_addr()?, "metrics listening");
    // The API's /readyz reports a metrics listener that stopped early.
    let tasks = kairos_core::supervise::CriticalTasks::new();
    tasks.spawn("metrics listener", async move {
        let stopped = shutdown.cancelled_owned();
        if let Err(e) = kairos_api::serve_metrics(listener, handle, stopped).await {
            tracing::warn!(error = %e, "metrics listener stopped");
        }
    });
    Ok(state.with_ready_check(std::sync::Arc::new(kairos::ops::TasksCheck(tasks))))
}
