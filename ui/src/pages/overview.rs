//! The overview: the tenant's jobs and executions by state (each linking to
//! the filtered list), the latest failures (each linking to its execution),
//! missed and late triggers, outcomes per minute and p50/p95/p99 trigger
//! lateness and run time over the last hour (server-rendered SVG), callbacks
//! in trouble and (for operator keys) the workers; refreshed every 2 s.

use super::executions::filter::local_input;
use super::live;
use super::query;
use crate::UiState;
use crate::chart;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kairos_core::execution::Execution;
use kairos_core::job::Job;
use kairos_core::overview::{ExecFilter, FAILED_STATES, LATE_AFTER_MS, Overview, Timing, quantile};
use kairos_core::time::{Millis, now_ms};
use kairos_core::trigger::MISFIRE_THRESHOLD_MS;
use kairos_core::worker::{WorkerInfo, WorkerState};
use maud::{Markup, html};
use std::collections::HashMap;

const HOUR_MS: Millis = 3_600_000;
const MINUTE_MS: Millis = 60_000;
/// Width of a bucket of the percentile charts.
const BUCKET_MS: Millis = 5 * MINUTE_MS;
/// Latest failures listed.
const FAILURES_SHOWN: u32 = 5;

/// `GET /ui/overview`.
pub(crate) async fn page(State(state): State<UiState>, ctx: Ctx) -> Response {
    match fragment(&state, &ctx).await {
        Ok(inner) => view::page(
            &ctx,
            "Overview",
            Nav::Overview,
            live("overview-live", "/ui/overview/live", inner),
        )
        .into_response(),
        Err(res) => res,
    }
}

/// `GET /ui/overview/live`: the live region's content.
pub(crate) async fn live_region(State(state): State<UiState>, ctx: Ctx) -> Response {
    match fragment(&state, &ctx).await {
        Ok(inner) => inner.into_response(),
        Err(res) => res,
    }
}

async fn fragment(state: &UiState, ctx: &Ctx) -> Result<Markup, Response> {
    let now = now_ms();
    let since = now - HOUR_MS;
    let o = state
        .store
        .tenant_overview(ctx.tenant(), since)
        .await
        .map_err(view::store_error)?;
    let timing = state
        .store
        .trigger_timing(ctx.tenant(), since, now)
        .await
        .map_err(view::store_error)?;
    let failed = ExecFilter {
        statuses: FAILED_STATES.to_vec(),
        limit: FAILURES_SHOWN,
        ..ExecFilter::default()
    };
    let failures = state
        .store
        .executions_list(ctx.tenant(), &failed)
        .await
        .map_err(view::store_error)?
        .items;
    let mut jobs: HashMap<String, Job> = HashMap::new();
    for e in &failures {
        if !jobs.contains_key(&e.job_id) {
            let job = state
                .store
                .job_get(ctx.tenant(), &e.job_id)
                .await
                .map_err(view::store_error)?;
            if let Some(j) = job {
                jobs.insert(e.job_id.clone(), j);
            }
        }
    }
    // Their errors may echo a job's sensitive values: redacted for every role.
    let failures = crate::shown::executions(state, &jobs, failures);
    let from = local_input(since);
    let by_state = format!(
        "/ui/executions?{}&status=",
        query(&[("filtered", "1"), ("from", &from)])
    );
    let workers = if ctx.is_operator() {
        Some(
            state
                .store
                .workers_list()
                .await
                .map_err(view::store_error)?,
        )
    } else {
        None
    };
    Ok(html! {
        div.cards {
            section.card aria-labelledby="c-jobs" {
                h2 id="c-jobs" { "Jobs" }
                (counts(o.jobs.iter().map(|(s, n)| (s.as_str(), *n)), "No jobs yet.", Some("/ui/jobs?status=")))
            }
            section.card aria-labelledby="c-execs" {
                h2 id="c-execs" { "Executions " span.muted { "(due in the last hour)" } }
                (counts(o.executions.iter().map(|(s, n)| (s.as_str(), *n)), "None in the last hour.", Some(&by_state)))
            }
            section.card aria-labelledby="c-late" {
                h2 id="c-late" { "Triggers " span.muted { "(due in the last hour)" } }
                (triggers(&timing, &from))
                (lateness(&o))
            }
            section.card aria-labelledby="c-cb" {
                h2 id="c-cb" { "Callbacks" }
                dl.figures {
                    div { dt { (view::badge("pending")) " retrying" } dd { (o.callbacks_retrying) } }
                    div { dt { (view::badge("dead")) " dead" } dd { (o.callbacks_dead) } }
                }
            }
        }
        section.card.wide aria-labelledby="c-failures" {
            h2 id="c-failures" { "Latest failures" }
            (latest_failures(&failures, &jobs))
        }
        section.card.wide aria-labelledby="c-chart" {
            h2 id="c-chart" { "Succeeded and failed per minute, last hour" }
            (chart(&o, now))
        }
        div.cards.charts {
            section.card aria-labelledby="c-lateness" {
                h2 id="c-lateness" { "Dispatch lateness, p50 / p95 / p99" }
                p.muted { "Dispatched − due, first attempts, per 5 minutes." }
                (percentile_chart("Dispatch lateness per 5 minutes, last hour", &timing.lateness, now, "No trigger dispatched in the last hour."))
            }
            section.card aria-labelledby="c-runtime" {
                h2 id="c-runtime" { "Run time, p50 / p95 / p99" }
                p.muted { "Finished − started, by finish time, per 5 minutes." }
                (percentile_chart("Run time per 5 minutes, last hour", &timing.durations, now, "No execution finished in the last hour."))
            }
        }
        @if let Some(workers) = workers {
            section.card.wide aria-labelledby="c-workers" {
                h2 id="c-workers" { "Workers" }
                (worker_summary(&workers, now))
            }
        }
    })
}

fn counts<'a>(
    items: impl Iterator<Item = (&'a str, u64)>,
    empty: &str,
    link: Option<&str>,
) -> Markup {
    let items: Vec<_> = items.collect();
    html! {
        @if items.is_empty() {
            p.muted { (empty) }
        } @else {
            dl.figures {
                @for (state, n) in items {
                    div {
                        dt {
                            @if let Some(l) = link {
                                a href={ (l) (state) } { (view::badge(state)) }
                            } @else {
                                (view::badge(state))
                            }
                        }
                        dd { (n) }
                    }
                }
            }
        }
    }
}

/// Missed and late triggers, each with what it counts.
fn triggers(t: &Timing, from: &str) -> Markup {
    let skipped = format!(
        "/ui/executions?{}",
        query(&[("filtered", "1"), ("status", "skipped"), ("from", from)])
    );
    html! {
        dl.figures {
            div id="missed" { dt { "missed" } dd { (t.missed()) } }
            div id="late" { dt { "late" } dd { (t.late) } }
        }
        p.hint {
            strong { "Missed" } ": " (t.misfired) " misfired (claimed more than "
            (view::duration(MISFIRE_THRESHOLD_MS)) " after due, e.g. while no dispatcher ran) and "
            a href=(skipped) { (t.skipped) " skipped" } " (an earlier run still ran). "
            strong { "Late" } ": first attempts dispatched more than " (view::duration(LATE_AFTER_MS))
            " after due, or still waiting that long (e.g. for a worker that serves the handler)."
        }
    }
}

fn lateness(o: &Overview) -> Markup {
    let q = |p| quantile(&o.lateness_ms, p);
    html! {
        @if let (Some(p50), Some(p95), Some(p99)) = (q(0.5), q(0.95), q(0.99)) {
            dl.figures {
                div { dt { "lateness p50" } dd { (view::duration(p50.max(0))) } }
                div { dt { "p95" } dd { (view::duration(p95.max(0))) } }
                div { dt { "p99" } dd { (view::duration(p99.max(0))) } }
                div { dt { "samples" } dd { (o.lateness_ms.len()) } }
            }
        } @else {
            p.muted { "No trigger dispatched in the last hour." }
        }
    }
}

/// The newest executions that failed, timed out or were lost, each linking
/// to its page (attempts, error, log).
fn latest_failures(items: &[Execution], jobs: &HashMap<String, Job>) -> Markup {
    html! {
        @if items.is_empty() {
            p.muted { "No failures." }
        } @else {
            ul.failures {
                @for e in items {
                    @let name = jobs.get(&e.job_id).map_or(e.job_id.as_str(), |j| j.name.as_str());
                    li {
                        a.exec-link href={ "/ui/executions/" (e.id) } {
                            (view::exec_badge(e.status)) " " strong { (name) }
                        }
                        " due " (view::time(Some(e.scheduled_at)))
                        @if let Some(err) = &e.error { " — " span.error-text { (super::job::truncate(err, 160)) } }
                    }
                }
            }
            p { a href="/ui/executions" { "Every failure →" } }
        }
    }
}

/// Percentiles of `samples` over the last hour, in 5-minute buckets.
fn percentile_chart(label: &str, samples: &[(Millis, i64)], now: Millis, empty: &str) -> Markup {
    let n = (HOUR_MS / BUCKET_MS) as usize;
    let start = now - now.rem_euclid(BUCKET_MS) - (n as Millis - 1) * BUCKET_MS;
    let buckets = chart::buckets(samples, start, BUCKET_MS, n);
    chart::percentiles(label, &buckets, empty, ["55 min ago", "30 min ago", "now"])
}

/// Stacked bars, one per minute: succeeded (bottom) and failed (top). The
/// numbers are also in a table for screen readers and copy-paste.
fn chart(o: &Overview, now: Millis) -> Markup {
    let first = now - now.rem_euclid(MINUTE_MS) - 59 * MINUTE_MS;
    let slots: Vec<(Millis, u64, u64)> = (0..60)
        .map(|i| {
            let minute = first + i * MINUTE_MS;
            let c = o.per_minute.iter().find(|c| c.minute == minute);
            (
                minute,
                c.map_or(0, |c| c.succeeded),
                c.map_or(0, |c| c.failed),
            )
        })
        .collect();
    let max = slots
        .iter()
        .map(|(_, s, f)| s + f)
        .max()
        .unwrap_or(0)
        .max(1);
    let (total_ok, total_failed) = slots
        .iter()
        .fold((0, 0), |(a, b), (_, s, f)| (a + s, b + f));
    let h = 120.0;
    let label = format!(
        "{total_ok} succeeded and {total_failed} failed in the last hour; tallest minute {max}"
    );
    html! {
        svg.chart viewBox="0 0 600 121" role="img" aria-label=(label) preserveAspectRatio="none" {
            title { (label) }
            line.axis x1="0" y1="120.5" x2="600" y2="120.5" {}
            @for (i, (minute, ok, failed)) in slots.iter().enumerate() {
                @let x = i as f64 * 10.0 + 1.0;
                @let ok_h = *ok as f64 / max as f64 * h;
                @let failed_h = *failed as f64 / max as f64 * h;
                g {
                    title { (view::zoned(*minute, &chrono_tz::UTC)) ": " (ok) " succeeded, " (failed) " failed" }
                    rect.ok x=(x) y=(h - ok_h) width="8" height=(ok_h) {}
                    rect.bad x=(x) y=(h - ok_h - failed_h) width="8" height=(failed_h) {}
                }
            }
        }
        div.axis-labels aria-hidden="true" { span { "60 min ago" } span { "30 min ago" } span { "now" } }
        p.legend {
            span.key.ok aria-hidden="true" {} " succeeded (" (total_ok) ")  "
            span.key.bad aria-hidden="true" {} " failed, timed out or lost (" (total_failed) ")"
        }
    }
}

fn worker_summary(workers: &[WorkerInfo], now: Millis) -> Markup {
    let count = |s: WorkerState| workers.iter().filter(|w| w.state == s).count();
    html! {
        dl.figures {
            div { dt { (view::badge("online")) " up" } dd { (count(WorkerState::Online)) } }
            div { dt { (view::badge("draining")) } dd { (count(WorkerState::Draining)) } }
            div { dt { (view::badge("offline")) " dead" } dd { (count(WorkerState::Offline)) } }
        }
        (super::workers::table(workers, now))
    }
}
