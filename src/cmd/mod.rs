//! One module per subcommand; each connects what it needs, runs until a
//! signal, and shuts down cleanly.

mod api;
mod bench;
mod dev;
mod dispatcher;
mod migrate;
mod relay;
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
        Command::Bench(args) => bench::run(args).await,
    }
}

/// Queue and key names for the configured namespace.
fn names(arg: &NamespaceArg, file: &FileSettings) -> Names {
    Names::new(
        pick(arg.namespace.clone(), file.namespace.clone()).unwrap_or_else(|| "kairos".into()),
    )
}

/// The API's due notifier: announces a due time without making the request
/// wait for it (a lost announcement only costs latency).
fn announce_due(due: std::sync::Arc<dyn kairos_core::due::DueSignal>) -> kairos_api::DueNotifier {
    std::sync::Arc::new(move |at| {
        let due = due.clone();
        tokio::spawn(async move { due.announce(at).await });
    })
}

/// What is kept of execution logs (`KAIROS_LOG_*`).
fn log_config(
    arg: &crate::cli::LogArg,
    file: &FileSettings,
) -> Result<kairos_dispatcher::logs::LogConfig> {
    let mut cfg = kairos_dispatcher::logs::LogConfig::default();
    if let Some(h) = pick(arg.log_retention_hours, file.log_retention_hours) {
        if h == 0 {
            anyhow::bail!("KAIROS_LOG_RETENTION_HOURS must be at least 1");
        }
        cfg.retention = std::time::Duration::from_secs(h.saturating_mul(3600));
    }
    if let Some(n) = pick(arg.log_max_lines, file.log_max_lines) {
        if n == 0 {
            anyhow::bail!("KAIROS_LOG_MAX_LINES must be at least 1");
        }
        cfg.limits.max_lines = n;
    }
    if let Some(b) = pick(arg.log_max_bytes, file.log_max_bytes) {
        if b < 1024 {
            anyhow::bail!("KAIROS_LOG_MAX_BYTES must be at least 1024");
        }
        cfg.limits.max_bytes = b;
    }
    Ok(cfg)
}
