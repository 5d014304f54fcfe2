//! One module per subcommand; each connects what it needs, runs until a
//! signal, and shuts down cleanly.

mod api;
mod bench;
mod dev;
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
        Command::Bench(args) => bench::run(args).await,
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

/// The API configuration from the limit settings.
fn api_config(
    args: &crate::cli::ApiLimitsArg,
    file: &FileSettings,
) -> Result<kairos_api::ApiConfig> {
    let mut cfg = kairos_api::ApiConfig::default();
    if let Some(r) = pick(args.api_create_rate, file.api_create_rate) {
        if !r.is_finite() || r <= 0.0 {
            anyhow::bail!("KAIROS_API_CREATE_RATE must be a positive number");
        }
        cfg.create_rate_per_sec = r;
    }
    if let Some(b) = pick(args.api_create_burst, file.api_create_burst) {
        cfg.create_burst = b.max(1);
    }
    if let Some(m) = pick(args.api_max_live_jobs, file.api_max_live_jobs) {
        cfg.max_live_jobs = m;
    }
    Ok(cfg)
}

/// `state` with `/metrics` served: on the API's listener, or on its own at
/// `KAIROS_METRICS_ADDR` (then the API's `/metrics` is 404).
async fn with_metrics(
    state: kairos_api::AppState,
    args: &crate::cli::ApiLimitsArg,
    file: &FileSettings,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<kairos_api::AppState> {
    let handle = kairos::ops::install_prometheus()?;
    let Some(addr) = pick(args.metrics_addr.clone(), file.metrics_addr.clone()) else {
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

/// `KAIROS_WORKER_ATTEMPT_KEY_TTL_MS`, when set: shorter than a minute would
/// let a dispatch redelivered while its handler still runs start it again.
fn attempt_key_ttl(
    arg: &crate::cli::AttemptKeyArg,
    file: &FileSettings,
) -> Result<Option<std::time::Duration>> {
    pick(
        arg.worker_attempt_key_ttl_ms,
        file.worker_attempt_key_ttl_ms,
    )
    .map(|ms| at_least(ms, 60_000, "KAIROS_WORKER_ATTEMPT_KEY_TTL_MS"))
    .transpose()
}

/// `ms` as a duration, refused below `min` with the setting's name.
fn at_least(ms: u64, min: u64, var: &str) -> Result<std::time::Duration> {
    if ms < min {
        anyhow::bail!("{var} must be at least {min} ms (got {ms})");
    }
    Ok(std::time::Duration::from_millis(ms))
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
