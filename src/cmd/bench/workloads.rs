//! The workloads `create` (steady creation, create → succeeded), `burst`
//! (many jobs due at one instant) and `cron` (trigger lateness of
//! every-second schedules), and what they share (`priority` is in its own
//! module). Each records its figures in the report.

use super::api::{Api, JobRead, Run, Times};
use super::report::Report;
use anyhow::{Result, bail};
use futures::{StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use kairos_core::time::{Millis, now_ms, to_rfc3339};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn bar(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, {elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// How jobs are sent: one request each, or `batch` to a request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sending {
    pub(super) connections: usize,
    pub(super) batch: usize,
    /// Requests per second (0: as fast as the connections go; see [`Pace`]).
    pub(super) rate: f64,
}

/// An open-loop pace: request `i` is sent at `i / rate` seconds after the
/// start, whenever the answers before it came, so a slow answer does not
/// lower the load it measures (no pace: as fast as the connections go).
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    started: Instant,
    spacing: Option<Duration>,
}

impl Pace {
    /// A pace of `rate` requests a second from now (0: none).
    pub(super) fn new(rate: f64) -> Self {
        Pace {
            started: Instant::now(),
            spacing: (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate)),
        }
    }

    /// Waits for request `i`'s slot.
    pub(super) async fn slot(self, i: usize) {
        if let Some(spacing) = self.spacing {
            tokio::time::sleep_until((self.started + spacing * i as u32).into()).await;
        }
    }
}

/// Creates `n` jobs from concurrent requests; their ids and how long
/// creating all of them took.
pub(super) async fn create_all(
    api: &Api,
    n: usize,
    how: Sending,
    body: impl Fn(usize) -> Value,
    report: &mut Report,
) -> Result<(Vec<String>, Duration)> {
    let progress = bar(n, "create");
    let per_request = how.batch.max(1);
    let started = Instant::now();
    let body = &body;
    let requests = (0..n)
        .step_by(per_request)
        .map(|first| first..(first + per_request).min(n))
        .enumerate();
    let pace = Pace::new(how.rate);
    let results: Vec<(Vec<String>, f64)> = futures::stream::iter(requests)
        .map(|(i, items)| {
            let progress = &progress;
            async move {
                pace.slot(i).await;
                let t0 = Instant::now();
                let count = items.len();
                let ids = if per_request == 1 {
                    vec![api.create(&body(items.start)).await?]
                } else {
                    api.create_batch(items.map(body).collect()).await?
                };
                progress.inc(count as u64);
                anyhow::Ok((ids, t0.elapsed().as_secs_f64() * 1e3))
            }
        })
        .buffer_unordered(how.connections.max(1))
        .try_collect()
        .await?;
    let took = started.elapsed();
    progress.finish();
    let (ids, round_trips): (Vec<Vec<String>>, Vec<f64>) = results.into_iter().unzip();
    report.figure("creates/s", n as f64 / took.as_secs_f64(), "jobs/s");
    let label = if per_request == 1 {
        "create (HTTP round trip)".to_string()
    } else {
        format!("batch of {per_request} (HTTP round trip)")
    };
    report.latency(&label, round_trips);
    Ok((ids.into_iter().flatten().collect(), took))
}

/// Waits until every job in `ids` succeeded or failed; the times of those
/// that succeeded.
///
/// Reads back exactly the jobs this run created, each by id, so the cost is
/// the run's size and never the table's: listing the tenant's finished
/// jobs instead grew with every earlier run and hung the bench after large
/// bursts.
pub(super) async fn wait_finished(
    api: &Api,
    ids: &[String],
    connections: usize,
    deadline: Duration,
    report: &mut Report,
) -> Result<Vec<Times>> {
    let progress = bar(ids.len(), "finish");
    let start = Instant::now();
    // A few probes (the last jobs created, and some spread over the rest)
    // decide when reading every job is worth it, so the bench's own
    // polling does not weigh on what it measures.
    let probes: Vec<&str> = ids
        .iter()
        .rev()
        .step_by((ids.len() / 8).max(1))
        .take(9)
        .map(String::as_str)
        .collect();
    loop {
        let mut finished = 0;
        for id in &probes {
            if ended(&api.job(id).await?.status) {
                finished += 1;
            }
        }
        if finished == probes.len() {
            break;
        }
        if start.elapsed() > deadline {
            progress.abandon();
            bail!("jobs still unfinished after {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut done = Vec::with_capacity(ids.len());
    let mut failed = 0;
    let mut unfinished: Vec<&str> = ids.iter().map(String::as_str).collect();
    loop {
        let reads: Vec<JobRead> = futures::stream::iter(&unfinished)
            .map(|id| api.job(id))
            .buffered(connections.max(1))
            .try_collect()
            .await?;
        let mut still = Vec::new();
        for (id, read) in unfinished.iter().zip(reads) {
            match read.status.as_str() {
                "succeeded" => done.push(read.times),
                "failed" => failed += 1,
                _ => still.push(*id),
            }
        }
        progress.set_position((done.len() + failed) as u64);
        unfinished = still;
        if unfinished.is_empty() {
            progress.finish();
            if failed > 0 {
                report.note(format!("{failed} jobs failed"));
            }
            return Ok(done);
        }
        if start.elapsed() > deadline {
            progress.abandon();
            bail!(
                "{} of {} jobs finished within {deadline:?}",
                done.len() + failed,
                ids.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether a job status is final for the bench.
fn ended(status: &str) -> bool {
    matches!(status, "succeeded" | "failed")
}

/// Stores `future` one-shot jobs due in 30 days and `cron` schedules firing
/// each minute, 1,000 to a batch request, before a workload runs: the
/// figures then show what a large table and a steady cron load cost.
pub(super) async fn preload(
    api: &Api,
    future: usize,
    cron: usize,
    connections: usize,
    report: &mut Report,
) -> Result<()> {
    const PER_REQUEST: usize = 1_000;
    let how = Sending {
        connections: connections.clamp(1, 8),
        batch: PER_REQUEST,
        rate: 0.0,
    };
    if future > 0 {
        let at = to_rfc3339(now_ms() + 30 * 24 * 3_600_000);
        let body = |i: usize| json!({"jobName": format!("preload-{i}"), "jobHandler": "noop", "triggerAt": at});
        let mut figures = Report::scratch();
        let (_, took) = create_all(api, future, how, body, &mut figures).await?;
        report.figure("preloaded future jobs", future as f64, "");
        report.figure("preload rate", future as f64 / took.as_secs_f64(), "jobs/s");
    }
    if cron > 0 {
        let body = |i: usize| json!({"jobName": format!("preload-cron-{i}"), "jobHandler": "noop", "cronExpr": "0 * * * * *"});
        let mut figures = Report::scratch();
        create_all(api, cron, how, body, &mut figures).await?;
        report.figure("preloaded every-minute schedules", cron as f64, "");
    }
    Ok(())
}

pub(super) fn span_ms(from: Millis, to: Option<Millis>) -> Option<f64> {
    to.map(|t| (t - from) as f64)
}

/// `create`: N noop jobs created as fast as C connections allow; how fast
/// they were created and how soon each one ran (server timestamps).
pub(super) async fn create(
    api: &Api,
    n: usize,
    how: Sending,
    deadline: Duration,
    report: &mut Report,
) -> Result<()> {
    let body = |i: usize| json!({"jobName": format!("bench-{i}"), "jobHandler": "noop"});
    let (ids, _) = create_all(api, n, how, body, report).await?;
    let done = wait_finished(api, &ids, how.connections, deadline, report).await?;
    let first_created = done.iter().map(|t| t.created).min();
    let last_finished = done.iter().filter_map(|t| t.finished).max();
    if let (Some(a), Some(b)) = (first_created, last_finished) {
        let secs = ((b - a) as f64 / 1e3).max(1e-3);
        report.figure(
            "jobs/s, first create → last succeeded",
            done.len() as f64 / secs,
            "jobs/s",
        );
    }

    report.latency(
        "create → dispatched",
        done.iter()
            .filter_map(|t| span_ms(t.created, t.dispatched))
            .collect(),
    );
    report.latency(
        "create → started",
        done.iter()
            .filter_map(|t| span_ms(t.created, t.started))
            .collect(),
    );
    report.latency(
        "create → succeeded",
        done.iter()
            .filter_map(|t| span_ms(t.created, t.finished))
            .collect(),
    );
    Ok(())
}

/// `burst`: N one-shot noop jobs stored ahead of one common due time; how
/// long after it the last one finished.
pub(super) async fn burst(
    api: &Api,
    n: usize,
    how: Sending,
    lead: Duration,
    deadline: Duration,
    report: &mut Report,
) -> Result<()> {
    let due = now_ms() + lead.as_millis() as Millis;
    let at = to_rfc3339(due);
    let body =
        |i: usize| json!({"jobName": format!("burst-{i}"), "jobHandler": "noop", "triggerAt": at});
    let (ids, _) = create_all(api, n, how, body, report).await?;
    let done = wait_finished(api, &ids, how.connections, deadline + lead, report).await?;
    let late_creates = done.iter().filter(|t| t.created > due).count();
    if late_creates > 0 {
        report.note(format!(
            "{late_creates} jobs were stored after the due time; raise --lead-ms for a clean burst"
        ));
    }
    if let Some(last) = done.iter().filter_map(|t| t.finished).max() {
        let span = ((last - due) as f64).max(1.0);
        report.figure("last finished after the due time", span, "ms");
        report.figure(
            "jobs/s from the due time",
            done.len() as f64 / (span / 1e3),
            "jobs/s",
        );
    }

    report.latency(
        "due → dispatched",
        done.iter()
            .filter_map(|t| span_ms(due, t.dispatched))
            .collect(),
    );
    report.latency(
        "due → started",
        done.iter()
            .filter_map(|t| span_ms(due, t.started))
            .collect(),
    );
    report.latency(
        "due → succeeded",
        done.iter()
            .filter_map(|t| span_ms(due, t.finished))
            .collect(),
    );
    Ok(())
}

/// `cron`: M schedules firing every second for a while; trigger lateness.
pub(super) async fn cron(
    api: &Api,
    schedules: usize,
    how: Sending,
    run_for: Duration,
    report: &mut Report,
) -> Result<()> {
    let connections = how.connections;
    let body = |i: usize| json!({"jobName": format!("cron-{i}"), "jobHandler": "noop", "cronExpr": "* * * * * *"});
    let (ids, _) = create_all(api, schedules, how, body, report).await?;
    // Measuring a schedule means letting it run: this wait is the workload.
    let progress = bar(run_for.as_secs() as usize, "run");
    for _ in 0..run_for.as_secs() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        progress.inc(1);
    }
    progress.finish();
    futures::stream::iter(&ids)
        .for_each_concurrent(connections.max(1), |id| api.cancel(id))
        .await;
    let runs: Vec<Vec<Run>> = futures::stream::iter(&ids)
        .map(|id| api.executions(id))
        .buffer_unordered(connections.max(1))
        .try_collect()
        .await?;
    let all: Vec<_> = runs.into_iter().flatten().collect();
    report.figure("executions", all.len() as f64, "");
    report.figure(
        "executions expected (about)",
        (schedules as u64 * run_for.as_secs()) as f64,
        "",
    );
    report.latency(
        "scheduled → dispatched",
        all.iter()
            .filter_map(|r| span_ms(r.scheduled, r.dispatched))
            .collect(),
    );
    report.latency(
        "scheduled → started (lateness)",
        all.iter()
            .filter_map(|r| span_ms(r.scheduled, r.started))
            .collect(),
    );
    Ok(())
}
