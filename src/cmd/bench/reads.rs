//! `kairos bench reads`: what the API's reads cost with a long history
//! stored (issue 43). The database is filled first with `--fill` finished
//! executions (set-based, by the store's own fill: 20 per job, every minute,
//! in the `default` tenant), then `-n` requests each, one at a time, of
//! `GET /openapi/jobs/{id}` (which reads the job's newest execution), a
//! job's executions page, and the executions list (first page and a page
//! deep in the history), timed by the client from request to last byte.

use super::api::Api;
use super::report::Report;
use anyhow::{Context, Result};
use kairos_core::tenant::DEFAULT_TENANT;
use kairos_core::time::now_ms;
use kairos_store_sql::{EXECUTIONS_PER_JOB, SqlStore, filled_job_id};
use std::time::Instant;

/// Page size the dashboard asks for.
const PAGE: u32 = 50;

/// Fills `db_url` with `fill` finished executions unless it already holds
/// the fill (its first filled job exists); the number of filled jobs.
pub(super) async fn fill(db_url: &str, fill: u64, report: &mut Report) -> Result<u64> {
    let store = SqlStore::connect(db_url)
        .await
        .with_context(|| format!("cannot open the database {}", redact(db_url)))?;
    store.migrate().await.context("cannot apply the schema")?;
    let jobs = fill.div_ceil(EXECUTIONS_PER_JOB).max(1);
    let present = kairos_core::store::JobStore::job_get(&store, DEFAULT_TENANT, &filled_job_id(0))
        .await
        .context("cannot read the database")?
        .is_some();
    if present {
        report.note(format!(
            "the database already held a fill; measured as found (assumed {jobs} jobs)"
        ));
    } else {
        eprintln!("filling {fill} finished executions ({jobs} jobs)…");
        let start = Instant::now();
        // The newest execution an hour ago: nothing of the fill is due.
        let filled = store
            .fill_history(DEFAULT_TENANT, fill, now_ms() - 3_600_000)
            .await
            .context("cannot fill the database")?;
        // What autovacuum or InnoDB's statistics do a while after so large
        // a change; the figures are those of a settled database.
        store
            .analyse()
            .await
            .context("cannot refresh the statistics")?;
        let secs = start.elapsed().as_secs_f64();
        report.figure("executions filled", filled.executions as f64, "rows");
        report.figure("fill time (with ANALYZE)", secs, "s");
    }
    store.close().await;
    Ok(jobs)
}

/// `scheme://…` without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// A spread of job numbers in `0..jobs` (a fixed stride, so runs compare).
fn job_numbers(jobs: u64, n: usize) -> impl Iterator<Item = u64> {
    const STRIDE: u64 = 7_919; // a prime: visits the jobs evenly
    (0..n as u64).map(move |i| (i * STRIDE) % jobs.max(1))
}

/// Times `n` GETs of each read.
pub(super) async fn run(api: &Api, jobs: u64, n: usize, report: &mut Report) -> Result<()> {
    let mut timed = |name: &str, samples: Vec<f64>| report.latency(name, samples);
    let time = |path: String| async move {
        let start = Instant::now();
        api.get_json(&path).await?;
        Ok::<f64, anyhow::Error>(start.elapsed().as_secs_f64() * 1_000.0)
    };
    // One untimed pass first, so the first samples are not the cold cache's.
    let warm = (n / 10).max(1);
    for k in job_numbers(jobs, warm) {
        time(format!("/openapi/jobs/{}", filled_job_id(k))).await?;
    }

    let mut samples = Vec::with_capacity(n);
    for k in job_numbers(jobs, n) {
        samples.push(time(format!("/openapi/jobs/{}", filled_job_id(k))).await?);
    }
    timed("GET /openapi/jobs/{id}", samples);

    let mut samples = Vec::with_capacity(n);
    for k in job_numbers(jobs, n) {
        let path = format!("/openapi/jobs/{}/executions?limit={PAGE}", filled_job_id(k));
        samples.push(time(path).await?);
    }
    timed("GET /openapi/jobs/{id}/executions", samples);

    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(time(format!("/openapi/executions?limit={PAGE}")).await?);
    }
    timed("GET /openapi/executions (first page)", samples);

    // A page deep in the history: the cursor after the hundredth page.
    let mut cursor = None;
    for _ in 0..100 {
        let path = match &cursor {
            None => format!("/openapi/executions?limit={PAGE}"),
            Some(c) => format!("/openapi/executions?limit={PAGE}&cursor={c}"),
        };
        let page = api.get_json(&path).await?;
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    if let Some(c) = cursor {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let path = format!("/openapi/executions?limit={PAGE}&cursor={c}");
            samples.push(time(path).await?);
        }
        timed("GET /openapi/executions (page 101)", samples);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_left_out_of_messages() {
        assert_eq!(
            redact("mysql://root:secret@127.0.0.1:3306/k"),
            "mysql://…@127.0.0.1:3306/k"
        );
        assert_eq!(redact("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[test]
    fn the_jobs_read_are_spread_over_the_fill() {
        let seen: std::collections::HashSet<u64> = job_numbers(50_000, 2_000).collect();
        assert_eq!(seen.len(), 2_000);
        assert!(seen.iter().all(|k| *k < 50_000));
    }
}
