//! The jobs list: filters (status, handler, name) and keyset paging in the
//! URL, and bulk pause/resume/cancel of the rows the operator ticked, after
//! a confirmation that lists exactly those jobs.

use super::executions::{COUNT_CAP, page_text, pager, total_text};
use crate::UiState;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use kairos_core::job::{Job, JobStatus};
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::store::JobFilter;
use maud::{Markup, html};
use serde::Deserialize;

/// Jobs per page.
const PAGE: u32 = 50;
/// Most jobs one bulk action takes (two pages' worth).
const MAX_BULK: usize = 100;

/// The list's query string: filters and the page cursor.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    status: String,
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

/// `GET /ui/jobs`.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Query(q): Query<ListQuery>,
) -> Response {
    let status = JobStatus::parse(&q.status);
    let filter = JobFilter {
        status,
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
        ("handler", q.handler.trim()),
        ("q", q.q.trim()),
    ];
    let body = html! {
        (view::flash(Some(q.notice.as_str()).filter(|n| !n.is_empty()), None))
        form.filters method="get" action="/ui/jobs" role="search" aria-label="Filter jobs" {
            label { "Status "
                select name="status" {
                    option value="" selected[status.is_none()] { "any" }
                    @for s in JobStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s)] { (s.as_str()) }
                    }
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
                                td data-label="Status" {
                                    (view::job_badge(j.status))
                                    @if let Some(r) = &j.pause_reason { br; span.pause-reason { (r) } }
                                }
                                td data-label="Handler" { code { (j.handler) } }
                                td data-label="Schedule" { (schedule_text(&j.schedule)) }
                                td data-label="Next trigger" { (view::time(j.next_trigger_at)) }
                                td data-label="Created" { (view::time(Some(j.created_at))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `POST /ui/jobs/bulk`: without `confirm`, a page listing the ticked jobs
/// and the action; with it, the action on exactly those ids.
pub(crate) async fn bulk(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let action = form.get("action");
    if !matches!(action, "pause" | "resume" | "cancel") {
        return view::page(
            &ctx,
            "Bulk action",
            Nav::Jobs,
            html! { p.error-box { "Unknown action." } },
        )
        .into_response();
    }
    let mut ids: Vec<&str> = form.all("ids");
    ids.dedup();
    if ids.is_empty() {
        return view::page(
            &ctx,
            "Bulk action",
            Nav::Jobs,
            html! {
                p.error-box role="alert" { "Tick at least one job first." }
                p { a href="/ui/jobs" { "Back to the jobs" } }
            },
        )
        .into_response();
    }
    if ids.len() > MAX_BULK {
        return view::page(
            &ctx,
            "Bulk action",
            Nav::Jobs,
            html! {
                p.error-box role="alert" { "At most " (MAX_BULK) " jobs at once." }
            },
        )
        .into_response();
    }
    if form.get("confirm") != "yes" {
        return confirm(&state, &ctx, action, &ids).await;
    }
    let mut results = Vec::new();
    for id in &ids {
        let (method, path) = match action {
            "pause" => (Method::POST, format!("/openapi/jobs/{id}/pause")),
            "resume" => (Method::POST, format!("/openapi/jobs/{id}/resume")),
            _ => (Method::DELETE, format!("/openapi/jobs/{id}")),
        };
        let outcome = state.api.call(ctx.key(), method, &path, None).await;
        results.push((id.to_string(), outcome));
    }
    let ok = results.iter().filter(|(_, r)| r.is_ok()).count();
    view::page(&ctx, "Bulk action done", Nav::Jobs, html! {
        p.notice role="status" { (action) ": " (ok) " of " (results.len()) " jobs done." }
        table.data {
            caption.sr-only { "Result per job" }
            thead { tr { th scope="col" { "Job" } th scope="col" { "Result" } } }
            tbody {
                @for (id, r) in &results {
                    tr {
                        th scope="row" { a href={ "/ui/jobs/" (id) } { code { (id) } } }
                        td {
                            @match r {
                                Ok(v) => { (view::badge(v["status"].as_str().unwrap_or("done"))) }
                                Err(e) => { span.error-text { (e.message) } }
                            }
                        }
                    }
                }
            }
        }
        p { a href="/ui/jobs" { "Back to the jobs" } }
    }).into_response()
}

async fn confirm(state: &UiState, ctx: &Ctx, action: &str, ids: &[&str]) -> Response {
    let mut rows = Vec::new();
    for id in ids {
        match state.store.job_get(ctx.tenant(), id).await {
            Ok(Some(j)) => rows.push((id.to_string(), Some(j))),
            Ok(None) => rows.push((id.to_string(), None)),
            Err(e) => return view::store_error(e),
        }
    }
    view::page(ctx, "Confirm bulk action", Nav::Jobs, html! {
        p { "You are about to " strong { (action) } " these " (ids.len()) " jobs, and no others:" }
        ul.confirm-list {
            @for (id, j) in &rows {
                li {
                    @match j {
                        Some(j) => { (j.name) " " code { (id) } " " (view::job_badge(j.status)) }
                        None => { code { (id) } " (not found)" }
                    }
                }
            }
        }
        form method="post" action="/ui/jobs/bulk" {
            (view::csrf(ctx))
            input type="hidden" name="action" value=(action);
            input type="hidden" name="confirm" value="yes";
            @for id in ids { input type="hidden" name="ids" value=(id); }
            div.toolbar {
                button.primary.danger[action == "cancel"] type="submit" { "Yes, " (action) " " (ids.len()) " jobs" }
                a href="/ui/jobs" { "No, go back" }
            }
        }
    }).into_response()
}
