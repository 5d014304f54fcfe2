//! The jobs list: filters (status, health, handler, name) and keyset paging
//! in the URL, each job's state (with `failing` for a recurring job whose
//! recent runs all failed) and last result, and the bulk actions' buttons
//! (see `bulk`).

use super::executions::{COUNT_CAP, page_text, pager, total_text};
use crate::UiState;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use kairos_core::job::{Job, JobHealth, JobStatus};
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::store::JobFilter;
use maud::{Markup, html};
use serde::Deserialize;

/// Jobs per page.
const PAGE: u32 = 50;

/// The list's query string: filters and the page cursor.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    health: String,
    #[serde(default)]
    handler: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    cursor: String,
    /// Which page this is (for "page 2 of 7"; the cursor says where).
    #[serde(default)]
    page: String,
    #[serde(default)]
    notice: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    sig: String,
}

/// The schedule in a few words.
pub(crate) fn schedule_text(s: &Schedule) -> String {
    match s {
        Schedule::Once { at } => format!(
            "once at {}",
            view::zoned(*at, &chrono_tz::UTC).trim_end_matches(" +00:00")
        ),
        Schedule::Recurring(r) => match &r.rule {
            Rule::Cron { expr, tz } => format!("cron {expr} ({tz})"),
            Rule::Every { every_ms } => {
                format!("every {}", view::duration(*every_ms as i64))
            }
            Rule::Delay { delay_ms } => {
                format!("{} after each run", view::duration(*delay_ms as i64))
            }
        },
    }
}

/// A cron schedule in words, in its zone (`None` for other schedules, and
/// for expressions the describer does not know).
pub(crate) fn schedule_words(s: &Schedule) -> Option<String> {
    match s.recurrence().map(|r| &r.rule) {
        Some(Rule::Cron { expr, tz }) => crate::cron_words::describe(expr, tz),
        _ => None,
    }
}

/// The schedule: its short text and, for cron, the expression in words.
pub(crate) fn schedule_cell(s: &Schedule) -> Markup {
    html! {
        (schedule_text(s))
        @if let Some(words) = schedule_words(s) { br; span.cron-words { (words) } }
    }
}

/// The job's state: `failing` before its status when its recent runs all
/// failed, and a paused job's reason.
pub(crate) fn state_cell(j: &Job) -> Markup {
    html! {
        @if j.health() == JobHealth::Failing {
            span.failing title={ "The last " (j.fail_streak) " runs failed" } { (view::badge("failing")) } " "
        }
        (view::job_badge(j.status))
        @if let Some(r) = &j.pause_reason { br; span.pause-reason { (r) } }
    }
}

/// The outcome of the job's latest finished execution, with when.
pub(crate) fn last_result_cell(j: &Job) -> Markup {
    html! {
        @match j.last_result {
            Some(r) => {
                (view::exec_badge(r))
                @if j.fail_streak > 1 { " " span.muted { "(" (j.fail_streak) " in a row)" } }
                br; span.small { (view::time(j.last_result_at)) }
            }
            None => { span.muted { "none yet" } }
        }
    }
}

/// The next trigger, or why there is none to show.
pub(crate) fn next_cell(j: &Job) -> Markup {
    if j.status == JobStatus::Paused {
        return html! { span.muted { "none while paused" } };
    }
    view::time(j.next_trigger_at)
}

/// `GET /ui/jobs`.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Query(q): Query<ListQuery>,
) -> Response {
    let status = JobStatus::parse(&q.status);
    let health = JobHealth::parse(&q.health);
    let filter = JobFilter {
        status,
        health,
        handler: Some(q.handler.trim().to_string()).filter(|h| !h.is_empty()),
        name_contains: Some(q.q.trim().to_string()).filter(|h| !h.is_empty()),
        limit: PAGE,
        cursor: Some(q.cursor.clone()).filter(|c| !c.is_empty()),
    };
    let page = match state.store.job_list(ctx.tenant(), &filter).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    let total = match state
        .store
        .job_count(ctx.tenant(), &filter, COUNT_CAP)
        .await
    {
        Ok(n) => n,
        Err(e) => return view::store_error(e),
    };
    let page_no: u64 = match q.page.parse() {
        Ok(n) if n >= 1 && !q.cursor.is_empty() => n,
        _ => 1,
    };
    let filters = [
        ("status", status.map_or("", |s| s.as_str())),
        ("health", health.map_or("", |h| h.as_str())),
        ("handler", q.handler.trim()),
        ("q", q.q.trim()),
    ];
    let body = html! {
        (crate::flash::shown(&ctx, &q.notice, &q.error, &q.sig))
        form.filters method="get" action="/ui/jobs" role="search" aria-label="Filter jobs" {
            label { "Status "
                select name="status" {
                    option value="" selected[status.is_none()] { "any" }
                    @for s in JobStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                    }
                }
            }
            label { "Health "
                select name="health" {
                    option value="" selected[health.is_none()] { "any" }
                    option value="failing" selected[health == Some(JobHealth::Failing)] { "failing" }
                    option value="ok" selected[health == Some(JobHealth::Ok)] { "ok" }
                }
            }
            label { "Handler " input type="text" name="handler" value=(q.handler.trim()) size="12"; }
            label { "Name contains " input type="search" name="q" value=(q.q.trim()) size="16"; }
            button type="submit" { "Filter" }
            @if filters.iter().any(|(_, v)| !v.is_empty()) { a href="/ui/jobs" { "Clear" } }
        }
        form method="post" action="/ui/jobs/bulk" id="bulk" {
            (view::csrf(&ctx))
            @if ctx.can_write() && !page.items.is_empty() {
                div.toolbar role="group" aria-label="Bulk actions on the ticked jobs" {
                    span.muted { "With the ticked jobs:" }
                    button type="submit" name="action" value="pause" { "Pause…" }
                    button type="submit" name="action" value="resume" { "Resume…" }
                    button.danger type="submit" name="action" value="cancel" { "Cancel…" }
                }
            }
            p.total role="status" {
                (total_text(total, COUNT_CAP, "job"))
                @if total > 0 { " " span.muted { (page_text(page_no, total, COUNT_CAP, PAGE)) } }
            }
            (table(&ctx, &page.items))
        }
        (pager(
            "/ui/jobs",
            &filters,
            page_no,
            Some(q.cursor.as_str()).filter(|c| !c.is_empty()),
            page.prev_cursor.as_deref(),
            page.next_cursor.as_deref(),
        ))
    };
    view::page(&ctx, "Jobs", Nav::Jobs, body).into_response()
}

fn table(ctx: &Ctx, jobs: &[Job]) -> Markup {
    html! {
        @if jobs.is_empty() {
            p.muted { "No jobs match." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Jobs" {
                table.data.stack {
                    caption.sr-only { "Jobs, newest first" }
                    thead { tr {
                        @if ctx.can_write() {
                            th scope="col" {
                                input type="checkbox" id="select-all" data-select-all="ids"
                                    aria-label="Tick every job on this page";
                            }
                        }
                        th scope="col" { "Name" } th scope="col" { "Status" }
                        th scope="col" { "Last result" }
                        th scope="col" { "Handler" } th scope="col" { "Schedule" }
                        th scope="col" { "Next trigger (UTC)" } th scope="col" { "Created (UTC)" }
                    } }
                    tbody {
                        @for j in jobs {
                            tr data-job=(j.id) {
                                @if ctx.can_write() {
                                    td.tick {
                                        input type="checkbox" name="ids" value=(j.id)
                                            aria-label={ "Tick " (j.name) };
                                    }
                                }
                                th scope="row" { a href={ "/ui/jobs/" (j.id) } { (j.name) } }
                                td.state data-label="Status" { (state_cell(j)) }
                                td.last-result data-label="Last result" { (last_result_cell(j)) }
                                td data-label="Handler" { code { (j.handler) } }
                                td data-label="Schedule" { (schedule_cell(&j.schedule)) }
                                td data-label="Next trigger" { (next_cell(j)) }
                                td data-label="Created" { (view::time(Some(j.created_at))) }
                            }
                        }
                    }
                }
            }
        }
    }
}
