//! One module per subcommand; each connects what it needs, runs until a
//! signal, and shuts down cleanly.

mod api;
mod dev;
mod dev_key;
mod dispatcher;
mod keys;
mod migrate;
mod relay;
mod tenants;
mod worker;

use crate::cli::{Cli, Command, NamespaceArg};
use crate::settings::{FileSettings, pick};
use anyhow::Result;
use kairos_core::protocol::Names;

/// Runs the chosen subcommand.
pub async fn run(cli: Cli) -> Result<()> {
    let file = FileSettings::load(cli.config.as_deref())?;
    match cli.command {
        Command::Migrate(args) => migrate::run(args, &file).await,
        Command::Api(args) => api::run(args, &file).await,
        Command::Dispatcher(args) => dispatcher::run(args, &file).await,
        Command::Worker(args) => worker::run(args, &file).await,
        Command::CallbackRelay(args) => relay::run(args, &file).await,
        Command::Dev(args) => dev::run(args, &file).await,
        Command::Tenants(cmd) => tenants::run(cmd, &file).await,
        Command::Keys(cmd) => keys::run(cmd, &file).await,
    }
}

/// Queue and key names for the configured namespace.
fn names(arg: &NamespaceArg, file: &FileSettings) -> Names {
    Names::new(
        pick(arg.namespace.clone(), file.namespace.clone()).unwrap_or_else(|| "kairos".into()),
    )
}

/// Installs the process-wide Prometheus recorder behind `GET /metrics`.
fn prometheus() -> Result<metrics_exporter_prometheus::PrometheusHandle> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("cannot set up metrics: {e}"))
}

/// The API's due notifier: announces a due time without making the request
/// wait for it (a lost announcement only costs latency).
fn announce_due(due: std::sync::Arc<dyn kairos_core::due::DueSignal>) -> kairos_api::DueNotifier {
    std::sync::Arc::new(move |at| {
        let due = due.clone();
        tokio::spawn(async move { due.announce(at).await });
    })
}
