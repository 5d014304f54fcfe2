//! `kairos`: one binary, one subcommand per process (see `kairos --help`).
//!
//! `main` only parses the command line, sets up logging and maps failures to
//! a one-line message and a non-zero exit; each subcommand lives in [`cmd`].

mod cli;
mod cmd;
mod settings;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(e) = init_logging() {
        eprintln!("kairos: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kairos: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kairos: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How log lines are written (`KAIROS_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines; coloured only on a terminal.
    Text,
    /// One JSON object per line, with the current span's fields
    /// (`job_id`, `execution_id`, `attempt`, `worker_id`, `trace_id`…).
    Json,
}

fn log_format(value: Option<&str>) -> Result<LogFormat, String> {
    match value.map(str::trim) {
        None | Some("") | Some("text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(other) => Err(format!(
            "KAIROS_LOG_FORMAT must be json or text (got {other:?})"
        )),
    }
}

fn init_logging() -> Result<(), String> {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("KAIROS_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info,sqlx=warn,lapin=warn"));
    let format = log_format(std::env::var("KAIROS_LOG_FORMAT").ok().as_deref())?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_formats_are_text_json_or_refused() {
        assert_eq!(log_format(None), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("text")), Ok(LogFormat::Text));
        assert_eq!(log_format(Some("json")), Ok(LogFormat::Json));
        assert!(
            log_format(Some("yaml"))
                .unwrap_err()
                .contains("KAIROS_LOG_FORMAT")
        );
    }
}
