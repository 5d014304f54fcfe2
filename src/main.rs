//! `kairos`: one binary, one subcommand per process (see `kairos --help`).
//!
//! `main` only parses the command line, sets up logging and maps failures to
//! a one-line message and a non-zero exit; each subcommand lives in [`cmd`].

mod cli;
mod cmd;
mod config;
#[cfg(feature = "otlp")]
mod otlp;

use clap::FromArgMatches;
use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: the hot paths allocate many small
/// short-lived values (rows, JSON, messages) from several threads, where
/// glibc's malloc spent a fifth of the CPU in profiles of a burst.
///
/// Cargo.toml turns on two of its features. `override` makes it the
/// allocator of the bundled SQLite too, which otherwise used glibc's malloc
/// (about a sixth of SQLite's threads' time in a burst, much of it
/// `malloc_consolidate`). `no_thp` stops it asking for transparent huge
/// pages: faulting in and zeroing fresh 2 MiB pages cost about 5 % of the
/// tokio threads' time while a burst's memory grew. Together: a 50,000-job
/// embedded burst went from about 13,000 to about 16,000 jobs/s
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let parsed = config::command().try_get_matches().and_then(|m| {
        let given = config::Given::from_matches(&m);
        cli::Cli::from_arg_matches(&m).map(|cli| (cli, given))
    });
    let (cli, given) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            if let Some(var) = config::env_source_of(&e) {
                eprintln!("(the value comes from {var})");
            }
            std::process::exit(e.exit_code());
        }
    };
    // deploy/kubernetes/secret.yaml ships placeholders: a process started
    // with one would only fail later, at its first connection, or (the
    // callback secret) sign with a value everybody knows.
    if let Err(e) = refuse_placeholders(std::env::vars()) {
        eprintln!("kairos: {e}");
        return ExitCode::FAILURE;
    }
    // Built before the runtime: the OTLP exporter runs on its own thread.
    let exporter = match init_logging(service_name(&cli.command)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("kairos: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = run(cli, given);
    // Spans still buffered are sent before the process ends.
    #[cfg(feature = "otlp")]
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    #[cfg(not(feature = "otlp"))]
    let () = exporter;
    code
}

/// The OpenTelemetry service name of a process (`OTEL_SERVICE_NAME` wins).
fn service_name(command: &cli::Command) -> &'static str {
    match command {
        cli::Command::Api(_) => "kairos-api",
        cli::Command::Dispatcher(_) => "kairos-dispatcher",
        cli::Command::Worker(_) => "kairos-worker",
        cli::Command::CallbackRelay(_) => "kairos-callback-relay",
        cli::Command::Dev(_) => "kairos-dev",
        _ => "kairos",
    }
}

fn run(cli: cli::Cli, given: config::Given) -> ExitCode {
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
    match runtime.block_on(cmd::run(cli, given)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kairos: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The marker of every placeholder value the Kubernetes manifests hold
/// (upper case: the compose file's local-only `change-me-in-production` is
/// not one).
const PLACEHOLDER: &str = "CHANGE-ME";

/// Refuses a `KAIROS_*` setting whose value still holds the placeholder
/// [`PLACEHOLDER`], naming the variables (never their values: they are
/// credentials).
fn refuse_placeholders(vars: impl Iterator<Item = (String, String)>) -> Result<(), String> {
    let mut found: Vec<String> = vars
        .filter(|(k, v)| k.starts_with("KAIROS_") && v.contains(PLACEHOLDER))
        .map(|(k, _)| k)
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    found.sort();
    Err(format!(
        "{} still hold{} the placeholder {PLACEHOLDER}: set the real value (on Kubernetes, \
         in the kairos-secrets Secret; see docs/operations.md, \"Kubernetes\")",
        found.join(", "),
        if found.len() == 1 { "s" } else { "" },
    ))
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

/// What [`init_logging`] leaves to flush at exit: the OTLP exporter, if on.
#[cfg(feature = "otlp")]
type Flush = Option<otlp::Exporter>;
#[cfg(not(feature = "otlp"))]
type Flush = ();

/// Log lines on stderr (`KAIROS_LOG`, `KAIROS_LOG_FORMAT`) and, with an
/// OTLP endpoint set, span export. The log filter applies to both (one
/// global filter: per-layer filters lost spans in practice); Kairos's spans
/// are at `info`, which the default filter keeps.
fn init_logging(service: &'static str) -> Result<Flush, String> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let filter = std::env::var("KAIROS_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info,sqlx=warn,lapin=warn"));
    let format = log_format(std::env::var("KAIROS_LOG_FORMAT").ok().as_deref())?;
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => lines
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    };
    let logging = tracing_subscriber::registry().with(filter).with(lines);
    #[cfg(feature = "otlp")]
    {
        let exporter = otlp::Exporter::from_env(service)?;
        logging
            .with(exporter.as_ref().map(otlp::Exporter::layer))
            .try_init()
            .map_err(|e| format!("cannot set up logging: {e}"))?;
        Ok(exporter)
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = service;
        logging
            .try_init()
            .map_err(|e| format!("cannot set up logging: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_settings_are_refused_by_name() {
        let vars = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(
            refuse_placeholders(vars(&[
                ("KAIROS_DATABASE_URL", "mysql://k:s3cret@db/kairos"),
                ("PATH", "CHANGE-ME"),
                ("KAIROS_CALLBACK_SECRET", "change-me-in-production"),
            ])),
            Ok(())
        );
        let e = refuse_placeholders(vars(&[
            ("KAIROS_REDIS_URL", "redis://:CHANGE-ME@redis:6379/0"),
            (
                "KAIROS_CALLBACK_SECRET",
                "CHANGE-ME-to-a-long-random-string",
            ),
            ("KAIROS_AMQP_URL", "amqp://k:real@mq/%2f"),
        ]))
        .unwrap_err();
        assert!(
            e.starts_with("KAIROS_CALLBACK_SECRET, KAIROS_REDIS_URL still hold the placeholder"),
            "{e}"
        );
        assert!(!e.contains("redis://"), "values are never shown: {e}");
    }

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
