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

use crate::cli::{Cli, Command, ConfigCommand, Process};
use crate::config::commands::DatabaseCmd;
use crate::config::conn::Database;
use crate::config::{self, Given, load, render};
use anyhow::Result;
use std::path::Path;

/// Runs the chosen subcommand; `given` says which settings came from a flag
/// or a variable, to lay over the `--config` file.
pub async fn run(cli: Cli, given: Given) -> Result<()> {
    let file = cli.config.as_deref();
    let g = &given;
    match cli.command {
        Command::Migrate(args) => migrate::run(load(file, &g.of(&args)?)?).await,
        Command::Api(args) => api::run(load(file, &g.of(&args)?)?).await,
        Command::Dispatcher(args) => dispatcher::run(load(file, &g.of(&args)?)?).await,
        Command::Worker(args) => worker::run(load(file, &g.of(&args)?)?).await,
        Command::CallbackRelay(args) => relay::run(load(file, &g.of(&args)?)?).await,
        Command::Dev(args) => dev::run(load(file, &g.of(&args)?)?).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Tenants(cmd) => tenants::run(cmd, file, g).await,
        Command::Keys(cmd) => keys::run(cmd, file, g).await,
        Command::Config(ConfigCommand::Print(process)) => {
            print!("{}", print(process, file, g)?);
            Ok(())
        }
    }
}

/// The effective settings of `process`, as `kairos config print` shows them.
fn print(process: Process, file: Option<&Path>, given: &Given) -> Result<String> {
    match process {
        Process::Api(a) => render(&loaded(file, given, &a)?),
        Process::Dispatcher(a) => render(&loaded(file, given, &a)?),
        Process::Worker(a) => render(&loaded(file, given, &a)?),
        Process::CallbackRelay(a) => render(&loaded(file, given, &a)?),
        Process::Dev(a) => render(&loaded(file, given, &a)?),
    }
}

/// `parsed`'s type loaded: its defaults, the file, then what was given.
fn loaded<C>(file: Option<&Path>, given: &Given, parsed: &C) -> Result<C>
where
    C: Default + serde::Serialize + serde::de::DeserializeOwned,
{
    load(file, &given.of(parsed)?)
}

/// [`print`], for the config tests.
#[cfg(test)]
pub(crate) fn print_for_test(
    process: Process,
    file: Option<&Path>,
    given: &Given,
) -> Result<String> {
    print(process, file, given)
}

/// The database URL of a management command.
fn database_url(db: &Database, file: Option<&Path>, given: &Given) -> Result<String> {
    let cfg: DatabaseCmd = load(file, &given.of(db)?)?;
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
