//! Executions across the tenant's jobs, by default the ones that went wrong
//! (failed, timed out, lost), with "run again" (a new trigger of the job).

use super::query;
use crate::UiState;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{RawQuery, State};
use axum::http::Method;
use axum::response::{IntoResponse, Redirect, Response};
use kairos_core::execution::ExecStatus;
use kairos_core::job::JobTransition;
use kairos_core::overview::{ExecFilter, FAILED_STATES};
use kairos_core::sensitive::Redactor;
use maud::html;
use serde_json::{Value, json};
use std::collections::HashMap;

const PAGE: u32 = 50;

/// `GET /ui/executions?status=…&cursor=…` (no `status` and no `filtered`:
/// the failure states).
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    RawQuery(raw): RawQuery,
) -> Response {
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let mut statuses: Vec<ExecStatus> = pairs
        .iter()
        .filter(|(k, _)| k == "status")
        .filter_map(|(_, v)| ExecStatus::parse(v))
        .collect();
    if statuses.is_empty() && get("filtered").is_none() {
        statuses = FAILED_STATES.to_vec();
    }
    let cursor = get("cursor").filter(|c| !c.is_empty()).map(str::to_string);
    let filter = ExecFilter {
        statuses: statuses.clone(),
        limit: PAGE,
        cursor: cursor.clone(),
    };
    let page = match state.store.executions_list(ctx.tenant(), &filter).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    let mut names: HashMap<String, String> = HashMap::new();
    let mut redactors: HashMap<String, Redactor> = HashMap::new();
    for e in &page.items {
        if !names.contains_key(&e.job_id) {
            match state.store.job_get(ctx.tenant(), &e.job_id).await {
                Ok(Some(j)) => {
                    redactors.insert(e.job_id.clone(), crate::shown::redactor(&state, &j));
                    names.insert(e.job_id.clone(), j.name);
                }
                Ok(None) => {}
                Err(err) => return view::store_error(err),
            }
        }
    }
    let mut page = page;
    page.items = page
        .items
        .into_iter()
        .map(|e| match redactors.get(&e.job_id) {
            Some(r) => crate::shown::execution(r, e),
            None => e,
        })
        .collect();
    let mut base: Vec<(&str, &str)> = statuses.iter().map(|s| ("status", s.as_str())).collect();
    base.push(("filtered", "1"));
    let next = page.next_cursor.as_deref().map(|c| {
        let mut q = base.clone();
        q.push(("cursor", c));
        format!("/ui/executions?{}", query(&q))
    });
    let body = html! {
        (view::flash(get("notice"), get("error")))
        form.filters method="get" action="/ui/executions" aria-label="Filter executions" {
            input type="hidden" name="filtered" value="1";
            fieldset.inline {
                legend { "Status" }
                @for s in ExecStatus::ALL {
                    label.check { input type="checkbox" name="status" value=(s.as_str()) checked[statuses.contains(&s)]; " " (view::exec_badge(s)) }
                }
            }
            button type="submit" { "Filter" }
            a href="/ui/executions" { "Failures only" }
            a href="/ui/executions?filtered=1" { "All" }
        }
        @if page.items.is_empty() {
            p.muted { "No executions match." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Table (scrolls sideways on narrow screens)" {
                table.data {
                    caption.sr-only { "Executions, newest trigger first" }
                    thead { tr {
                        th scope="col" { "Job" } th scope="col" { "Status" } th scope="col" .num { "Attempt" }
                        th scope="col" { "Worker" } th scope="col" { "Scheduled (UTC)" } th scope="col" { "Finished" }
                        th scope="col" { "Error" }
                        @if ctx.can_write() { th scope="col" { span.sr-only { "Actions" } } }
                    } }
                    tbody {
                        @for e in &page.items {
                            tr data-execution=(e.id) {
                                th scope="row" { a href={ "/ui/jobs/" (e.job_id) } { (names.get(&e.job_id).map_or(e.job_id.as_str(), String::as_str)) } }
                                td { (view::exec_badge(e.status)) }
                                td.num { (e.attempt) }
                                td { @if let Some(w) = &e.worker_id { code { (w) } } }
                                td { (view::time(Some(e.scheduled_at))) }
                                td { (view::time(e.finished_at)) }
                                td.output { @if let Some(err) = &e.error { span.error-text { (err) } } }
                                @if ctx.can_write() {
                                    td {
                                        form method="post" action="/ui/executions/rerun" {
                                            (view::csrf(&ctx))
                                            input type="hidden" name="job" value=(e.job_id);
                                            button.small type="submit" { "Run again" span.sr-only { ": " (names.get(&e.job_id).map_or(e.job_id.as_str(), String::as_str)) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if cursor.is_some() { a href={ "/ui/executions?" (query(&base)) } { "← First page" } }
            @if let Some(n) = next { a href=(n) rel="next" { "Next page →" } }
        }
    };
    view::page(&ctx, "Executions", Nav::Executions, body).into_response()
}

/// `POST /ui/executions/rerun`: runs the execution's job again — a trigger
/// now while the job may still fire; for a finished job (a one-shot that
/// failed, a cancelled job), a new one-shot job with the same handler,
/// params, callback, retries, timeout and group.
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
                &format!("/openapi/jobs/{}/trigger", job.id),
                None,
            )
            .await
            .map(|v| {
                format!(
                    "Job triggered again: execution {}.",
                    v["executionId"].as_str().unwrap_or("?")
                )
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
            .map(|v| {
                format!(
                    "Job run again as a new one-shot job {}.",
                    v["jobId"].as_str().unwrap_or("?")
                )
            })
    };
    let q = match outcome {
        Ok(notice) => query(&[("notice", &notice)]),
        Err(e) => query(&[("error", &e.message)]),
    };
    Redirect::to(&format!("/ui/executions?{q}")).into_response()
}
