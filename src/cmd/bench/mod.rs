//! `kairos bench`: throughput and latency of a deployment as a user sees it,
//! measured from the server's own timestamps (`createdAt`, `scheduledAt`,
//! `startedAt`, `finishedAt`), so client-side queueing does not blur the
//! figures. A benchmark prints figures; it asserts nothing.

mod api;
mod embedded;
mod priority;
mod reads;
mod report;
mod workflow;
mod workloads;

use crate::cli::{BenchArgs, BenchWorkload};
use anyhow::{Context, Result};
use api::Api;
use report::Report;
use std::time::Duration;

/// Waits for the API, then runs the preload and the chosen workload.
async fn measure(
    args: &BenchArgs,
    base: &str,
    key: Option<&str>,
    report: &mut Report,
) -> Result<()> {
    let api = Api::new(base, key, args.connections)?;
    api.wait_ready(Duration::from_secs(30))
        .await
        .with_context(|| format!("the API at {base} is not ready"))?;
    if args.workload == BenchWorkload::Reads {
        let jobs = match &args.db {
            // The embedded deployment was filled before it started.
            Some(db) if args.url.is_some() => reads::fill(db, args.fill, report).await?,
            _ => args
                .fill
                .div_ceil(kairos_store_sql::EXECUTIONS_PER_JOB)
                .max(1),
        };
        return reads::run(&api, jobs, args.jobs, report).await;
    }
    let deadline = Duration::from_secs(args.timeout);
    let how = workloads::Sending {
        connections: args.connections,
        batch: args.batch,
        rate: args.rate,
    };
    if args.preload + args.preload_cron > 0 {
        workloads::preload(
            &api,
            args.preload,
            args.preload_cron,
            args.connections,
            report,
        )
        .await?;
    }
    match args.workload {
        BenchWorkload::Create => workloads::create(&api, args.jobs, how, deadline, report).await,
        BenchWorkload::Burst => {
            let lead = args.lead_ms.map(Duration::from_millis).unwrap_or_else(|| {
                Duration::from_millis(3_000 + args.jobs as u64 /* 1,000 creates/s */)
            });
            workloads::burst(&api, args.jobs, how, lead, deadline, report).await
        }
        BenchWorkload::Priority => {
            let lead = args.lead_ms.map(Duration::from_millis).unwrap_or_else(|| {
                Duration::from_millis(3_000 + args.jobs as u64 /* 1,000 creates/s */)
            });
            priority::run(&api, args.jobs, how, lead, deadline, report).await
        }
        BenchWorkload::Workflow => workflow::run(&api, args.jobs, how, deadline, report).await,
        BenchWorkload::Reads => unreachable!("measured above"),
        BenchWorkload::Cron => {
            let run_for = Duration::from_secs(args.seconds);
            workloads::cron(&api, args.schedules, how, run_for, report).await
        }
    }
}

/// Runs the chosen workload against `--url` or an embedded `kairos dev`.
pub async fn run(args: BenchArgs) -> Result<()> {
    let mut embedded = None;
    let mut report = Report::new(&args, "");
    let mut key = args.key.clone();
    let base = match &args.url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            let dev = if args.workload == BenchWorkload::Reads {
                // Filled before the deployment starts, so the fill does not
                // compete with it.
                let dir = embedded::temp_dir()?;
                let db = args
                    .db
                    .clone()
                    .unwrap_or_else(|| embedded::temp_sqlite(&dir));
                reads::fill(&db, args.fill, &mut report).await?;
                embedded::Dev::start_in(dir, db).await?
            } else {
                embedded::Dev::start().await?
            };
            let base = dev.base.clone();
            if key.is_none() {
                key = Some(dev.key().await?);
            }
            embedded = Some(dev);
            base
        }
    };
    let target = match (&embedded, &args.db) {
        (Some(_), Some(db)) => format!("embedded kairos dev on {}", db_kind(db)),
        (Some(_), None) => "embedded kairos dev (temporary SQLite file)".to_string(),
        (None, _) => base.clone(),
    };
    report.retarget(&target);
    // The client gets a runtime of its own with one thread. On the shared
    // runtime every response woke a thread other than the one that sent
    // the request, and the bench paid a cross-thread wake-up (a syscall)
    // per request on the same cores as the deployment it measures.
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the bench client's runtime")?;
    let (args, outcome) = tokio::task::spawn_blocking(move || {
        let outcome = client.block_on(measure(&args, &base, key.as_deref(), &mut report));
        (args, outcome.map(|()| report))
    })
    .await
    .context("the bench client stopped")?;
    if let Some(dev) = embedded {
        dev.stop().await;
    }
    let report = outcome?;
    report.print();
    if let Some(path) = &args.json {
        report
            .write_json(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("figures written to {}", path.display());
    }
    Ok(())
}

/// The kind of database a URL names, for the report (never the URL, which
/// may carry a password).
fn db_kind(url: &str) -> &'static str {
    match url.split(':').next().unwrap_or_default() {
        "sqlite" => "SQLite",
        "mysql" | "mariadb" => "MySQL/MariaDB",
        "postgres" | "postgresql" => "PostgreSQL",
        _ => "a database",
    }
}
