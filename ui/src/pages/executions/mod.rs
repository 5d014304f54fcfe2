//! Executions across the tenant's jobs, by default the ones that went wrong
//! (failed, timed out, lost), filtered by state, job, handler, worker and
//! due time (all in the URL: `filter`), paged both ways with an approximate
//! total, exported as CSV or JSON (`export`), with "run again" (a new
//! trigger of the job).

pub(crate) mod export;
pub(crate) mod filter;

use super::query;
use crate::UiState;
use crate::flash::Notice;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{RawQuery, State};
use axum::http::Method;
use axum::response::{IntoResponse, Redirect, Response};
use export::MAX_EXPORT_ROWS;
use filter::{ListFilter, local_input};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::{Job, JobTransition};
use maud::{Markup, html};
use serde_json::{Value, json};
use std::collections::HashMap;

const PAGE: u32 = 50;
/// Counted up to this many matches; beyond, the total reads "more than".
pub(crate) const COUNT_CAP: u64 = 10_000;

/// The query string as name/value pairs (names repeat: `status`).
pub(crate) fn pairs(raw: Option<String>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// "1 234 executions match", or "more than 10 000" at the cap.
pub(crate) fn total_text(n: u64, cap: u64, what: &str) -> String {
    let grouped = |n: u64| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push('\u{202f}');
            }
            out.push(c);
        }
        out
    };
    match n {
        0 => format!("No {what}s match."),
        1 => format!("1 {what} matches."),
        n if n >= cap => format!("More than {} {what}s match.", grouped(cap)),
        n => format!("{} {what}s match.", grouped(n)),
    }
}

/// "Page 2 of 7" (of an approximate total), or "Page 2" past the cap.
pub(crate) fn page_text(page: u64, total: u64, cap: u64, size: u32) -> String {
    let pages = total.div_ceil(u64::from(size)).max(1);
    if total >= cap {
        format!("Page {page}")
    } else {
        format!("Page {page} of {pages}")
    }
}

/// The pager: first, previous and next pages, keeping `base` (the filters)
/// and counting pages in `page`.
pub(crate) fn pager(
    path: &str,
    base: &[(&str, &str)],
    page: u64,
    cursor: Option<&str>,
    prev: Option<&str>,
    next: Option<&str>,
) -> Markup {
    let link = |cursor: Option<&str>, n: u64| {
        let mut q = base.to_vec();
        let n = n.to_string();
        if let Some(c) = cursor {
            q.push(("cursor", c));
            q.push(("page", &n));
        }
        format!("{path}?{}", query(&q))
    };
    html! {
        nav.pager aria-label="Pages" {
            @if cursor.is_some() {
                a href=(link(None, 1)) { "« First page" }
                // A previous page that reaches the start is the first page.
                @match prev {
                    Some(p) if page > 2 => { a href=(link(Some(p), page - 1)) rel="prev" { "‹ Previous page" } }
                    _ => { a href=(link(None, 1)) rel="prev" { "‹ Previous page" } }
                }
            }
            @if let Some(n) = next { a href=(link(Some(n), page + 1)) rel="next" { "Next page ›" } }
        }
    }
}

/// `GET /ui/executions?status=…&job=…&handler=…&worker=…&from=…&to=…&cursor=…`
/// (no `status` and no `filtered`: the failure states).
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    RawQuery(raw): RawQuery,
) -> Response {
    let pairs = pairs(raw);
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let f = ListFilter::parse(&pairs);
    let cursor = get("cursor").filter(|c| !c.is_empty()).map(str::to_string);
    let page_no: u64 = get("page")
        .and_then(|p| p.parse().ok())
        .filter(|p| *p >= 1)
        .unwrap_or(1);
    let page_no = if cursor.is_some() { page_no } else { 1 };
    let form = filter_form(&f);
    if !f.errors.is_empty() {
        let body = html! {
            @for e in &f.errors { p.error-box role="alert" { (e) } }
            (form)
            p.muted { "Nothing is listed until the filter can be read." }
        };
        return view::page(&ctx, "Executions", Nav::Executions, body).into_response();
    }
    let filter = f.exec_filter(PAGE, cursor.clone());
    let page = match state.store.executions_list(ctx.tenant(), &filter).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    let total = match state
        .store
        .executions_count(ctx.tenant(), &filter, COUNT_CAP)
        .await
    {
        Ok(n) => n,
        Err(e) => return view::store_error(e),
    };
    // The page's jobs in one read, not one per execution's job.
    let mut ids: Vec<&str> = page.items.iter().map(|e| e.job_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let jobs: HashMap<String, Job> = match state.store.jobs_get_many(ctx.tenant(), &ids).await {
        Ok(found) => found.into_iter().map(|j| (j.id.clone(), j)).collect(),
        Err(err) => return view::store_error(err),
    };
    // Sensitive values of each job are redacted from its executions'
    // outputs and errors, for every role.
    let items = crate::shown::executions(&state, &jobs, page.items);
    let base = f.pairs();
    let export = |format: &str| {
        let mut q = base.clone();
        q.push(("format", format));
        format!("/ui/executions/export?{}", query(&q))
    };
    let body = html! {
        (crate::flash::shown(
            &ctx,
            get("notice").unwrap_or_default(),
            get("error").unwrap_or_default(),
            get("sig").unwrap_or_default(),
        ))
        (form)
        div.list-head {
            p.total role="status" {
                (total_text(total, COUNT_CAP, "execution"))
                @if total > 0 { " " span.muted { (page_text(page_no, total, COUNT_CAP, PAGE)) } }
            }
            @if total > 0 {
                p.export {
                    "Export: " a href=(export("csv")) download { "CSV" } " · " a href=(export("json")) download { "JSON" }
                    @if total > MAX_EXPORT_ROWS {
                        br;
                        span.note { "An export holds at most " (MAX_EXPORT_ROWS) " executions: the newest " (MAX_EXPORT_ROWS) " of these. Narrow the filter (e.g. a time range) for the rest." }
                    }
                }
            }
        }
        (table(&ctx, &items, &jobs))
        (pager("/ui/executions", &base, page_no, cursor.as_deref(), page.prev_cursor.as_deref(), page.next_cursor.as_deref()))
    };
    view::page(&ctx, "Executions", Nav::Executions, body).into_response()
}

fn filter_form(f: &ListFilter) -> Markup {
    let time_value = |raw: &str, ms: Option<i64>| ms.map_or(raw.to_string(), local_input);
    html! {
        form.filters method="get" action="/ui/executions" role="search" aria-label="Filter executions" {
            input type="hidden" name="filtered" value="1";
            fieldset.inline {
                legend { "Status" }
                @for s in ExecStatus::ALL {
                    label.check { input type="checkbox" name="status" value=(s.as_str()) checked[f.statuses.contains(&s)]; " " (view::exec_badge(s)) }
                }
            }
            label { "Job id " input type="text" name="job" value=(f.job) size="14" autocomplete="off"; }
            label { "Handler " input type="text" name="handler" value=(f.handler) size="12" autocomplete="off"; }
            label { "Worker " input type="text" name="worker" value=(f.worker) size="12" autocomplete="off"; }
            label { "Due from (UTC) " input type="datetime-local" step="1" name="from" value=(time_value(&f.from, f.from_ms)); }
            label { "Due before (UTC) " input type="datetime-local" step="1" name="to" value=(time_value(&f.to, f.to_ms)); }
            button type="submit" { "Filter" }
            a href="/ui/executions" { "Failures only" }
            a href="/ui/executions?filtered=1" { "All" }
        }
    }
}

/// The executions with their job, each linking to its page.
fn table(ctx: &Ctx, items: &[Execution], jobs: &HashMap<String, Job>) -> Markup {
    let filtered =
        |k: &str, v: &str| format!("/ui/executions?{}", query(&[("filtered", "1"), (k, v)]));
    html! {
        @if items.is_empty() {
            p.muted { "No executions match." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Executions" {
                table.data.stack {
                    caption.sr-only { "Executions, newest trigger first" }
                    thead { tr {
                        th scope="col" { "Job" } th scope="col" { "Status" } th scope="col" { "Handler" }
                        th scope="col" .num { "Attempt" } th scope="col" { "Worker" }
                        th scope="col" { "Scheduled (UTC)" } th scope="col" { "Finished" }
                        th scope="col" { "Error" }
                        @if ctx.can_write() { th scope="col" { span.sr-only { "Actions" } } }
                    } }
                    tbody {
                        @for e in items {
                            @let job = jobs.get(&e.job_id);
                            @let name = job.map_or(e.job_id.as_str(), |j| j.name.as_str());
                            tr data-execution=(e.id) {
                                th scope="row" { a href={ "/ui/jobs/" (e.job_id) } { (name) } }
                                td data-label="Status" { (view::exec_badge(e.status)) }
                                td data-label="Handler" { @if let Some(j) = job { a href=(filtered("handler", &j.handler)) { code { (j.handler) } } } }
                                td.num data-label="Attempt" { (e.attempt) (view::shard(e.shard)) }
                                td data-label="Worker" { @if let Some(w) = &e.worker_id { a href=(filtered("worker", w)) { code { (w) } } } }
                                td data-label="Scheduled" {
                                    a.exec-link href={ "/ui/executions/" (e.id) } {
                                        (view::time(Some(e.scheduled_at)))
                                        span.sr-only { ": execution of " (name) }
                                    }
                                }
                                td data-label="Finished" { (view::time(e.finished_at)) }
                                td.output data-label="Error" { @if let Some(err) = &e.error { span.error-text { (err) } } }
                                @if ctx.can_write() {
                                    td data-label="" {
                                        form method="post" action="/ui/executions/rerun" {
                                            (view::csrf(ctx))
                                            input type="hidden" name="job" value=(e.job_id);
                                            button.small type="submit" { "Run again" span.sr-only { ": " (name) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `POST /ui/executions/rerun`: runs the execution's job again — a trigger
/// now while the job may still fire; for a finished job (a one-shot that
/// failed, a cancelled job), a new one-shot job with the same handler,
/// params, callback, retries, timeout and group. Either way the new
/// execution's or job's page opens, saying what was done.
pub(crate) async fn rerun(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let job = match state.store.job_get(ctx.tenant(), form.get("job")).await {
        Ok(Some(j)) => j,
        Ok(None) => return view::not_found(&ctx, "job"),
        Err(e) => return view::store_error(e),
    };
    let outcome = if JobTransition::Claim.allowed_from(job.status) {
        state
            .api
            .call(
                ctx.key(),
                Method::POST,
                &format!("/openapi/jobs/{}/trigger", crate::api::segment(&job.id)),
                None,
            )
            .await
            .map(|v| match v["executionId"].as_str() {
                Some(e) => format!("/ui/executions/{e}?{}", query(&[Notice::RanAgain.pair()])),
                None => format!("/ui/executions?{}", query(&[Notice::RanAgain.pair()])),
            })
    } else {
        let mut body = json!({
            "jobName": job.name, "jobHandler": job.handler, "params": job.params,
            "maxAttempts": job.retry.max_attempts, "retryBackoffMs": job.retry.backoff_ms,
        });
        if !job.sensitive_params.is_empty() {
            body["sensitiveParams"] = json!(job.sensitive_params);
        }
        for (k, v) in [
            ("callbackUrl", job.callback_url.map(Value::from)),
            ("timeoutMs", job.timeout_ms.map(Value::from)),
            ("workerGroup", job.worker_group.map(Value::from)),
        ] {
            if let Some(v) = v {
                body[k] = v;
            }
        }
        state
            .api
            .call(ctx.key(), Method::POST, "/openapi/jobs", Some(&body))
            .await
            .map(|v| match v["jobId"].as_str() {
                Some(j) => format!("/ui/jobs/{j}?{}", query(&[Notice::RanAgainAsNew.pair()])),
                None => format!("/ui/executions?{}", query(&[Notice::RanAgainAsNew.pair()])),
            })
    };
    let target = match outcome {
        Ok(to) => to,
        Err(e) => format!("/ui/executions?{}", super::error_query(&ctx, &e.message)),
    };
    Redirect::to(&target).into_response()
}
