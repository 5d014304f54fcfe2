//! The overview: the tenant's jobs and executions by state, outcomes per
//! minute over the last hour, trigger lateness, callbacks in trouble and
//! (for admin keys) the workers; refreshed every 2 s.

use super::live;
use crate::UiState;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kairos_core::overview::{Overview, quantile};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::{WorkerInfo, WorkerState};
use maud::{Markup, html};

const HOUR_MS: Millis = 3_600_000;
const MINUTE_MS: Millis = 60_000;

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
                (counts(o.executions.iter().map(|(s, n)| (s.as_str(), *n)), "None in the last hour.", None))
            }
            section.card aria-labelledby="c-late" {
                h2 id="c-late" { "Trigger lateness " span.muted { "(last hour)" } }
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
        section.card.wide aria-labelledby="c-chart" {
            h2 id="c-chart" { "Succeeded and failed per minute, last hour" }
            (chart(&o, now))
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

fn lateness(o: &Overview) -> Markup {
    let p50 = quantile(&o.lateness_ms, 0.5);
    let p99 = quantile(&o.lateness_ms, 0.99);
    html! {
        @if let (Some(p50), Some(p99)) = (p50, p99) {
            dl.figures {
                div { dt { "p50" } dd { (view::duration(p50.max(0))) } }
                div { dt { "p99" } dd { (view::duration(p99.max(0))) } }
                div { dt { "samples" } dd { (o.lateness_ms.len()) } }
            }
        } @else {
            p.muted { "No trigger dispatched in the last hour." }
        }
    }
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
