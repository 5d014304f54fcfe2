//! The job page: definition and params, its health and last result, the
//! next five fire times in the job's zone (none while it is paused), a cron
//! expression in words, actions, and its executions (with callback
//! attempts and redelivery) refreshed every 2 s.

use super::{error_query, live, query};
use crate::UiState;
use crate::flash::Notice;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Redirect, Response};
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use kairos_core::execution::Execution;
use kairos_core::job::{Job, JobTransition};
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::shard::ExecutionMode;
use maud::{Markup, html};
use serde::Deserialize;

/// Executions shown on the job page.
const EXECUTIONS_SHOWN: u32 = 20;

/// Notice or error carried over a redirect (see [`crate::flash`]).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Flash {
    #[serde(default)]
    notice: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    sig: String,
}

/// The zone a job's times are shown in: a cron job's own, else UTC.
pub(crate) fn job_zone(job: &Job) -> chrono_tz::Tz {
    match &job.schedule {
        Schedule::Recurring(r) => match &r.rule {
            Rule::Cron { tz, .. } => tz.parse().unwrap_or(chrono_tz::UTC),
            _ => chrono_tz::UTC,
        },
        Schedule::Once { .. } => chrono_tz::UTC,
    }
}

/// Up to `n` fire times from the job's next trigger on; none while it is
/// paused (nothing fires until it is resumed, and a resume may treat the
/// missed ones by its misfire policy).
pub(crate) fn next_fires(job: &Job, n: usize) -> Vec<i64> {
    if job.status == kairos_core::job::JobStatus::Paused {
        return Vec::new();
    }
    let Some(first) = job.next_trigger_at else {
        return Vec::new();
    };
    let mut out = vec![first];
    if let Some(timeline) = job.schedule.recurrence().and_then(|r| r.timeline().ok()) {
        while out.len() < n {
            let last = out[out.len() - 1];
            match timeline.after(last) {
                Some(t) => out.push(t),
                None => break,
            }
        }
    }
    out
}

/// `GET /ui/jobs/{id}`.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(flash): Query<Flash>,
) -> Response {
    let said = crate::flash::shown(&ctx, &flash.notice, &flash.error, &flash.sig);
    render(&state, &ctx, &id, said, "").await
}

/// The job page saying `said` at the top, with `reason` in the pause
/// reason's field (what was typed, when a pause was refused).
async fn render(state: &UiState, ctx: &Ctx, id: &str, said: Markup, reason: &str) -> Response {
    let job = match state.store.job_get(ctx.tenant(), id).await {
        Ok(Some(j)) => j,
        Ok(None) => return view::not_found(ctx, "job"),
        Err(e) => return view::store_error(e),
    };
    let executions = match executions_region(state, ctx, &job).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let zone = job_zone(&job);
    let fires = next_fires(&job, 5);
    let body = html! {
        (said)
        (actions(ctx, &job, reason))
        div.cards {
            section.card aria-labelledby="h-def" {
                h2 id="h-def" { "Definition" }
                dl.props {
                    dt { "Id" } dd { code { (job.id) } }
                    dt { "Status" } dd id="job-status" {
                        (view::job_badge(job.status))
                        @if let Some(r) = &job.pause_reason { " " span.pause-reason { "— " (r) } }
                    }
                    @if job.schedule.is_recurring() {
                        dt { "Health" } dd id="job-health" {
                            @if job.health() == kairos_core::job::JobHealth::Failing {
                                (view::badge("failing")) " "
                                span { "the last " (job.fail_streak) " runs failed" }
                            } @else {
                                (view::badge("ok"))
                                @if job.fail_streak > 0 { " " span.muted { "(" (job.fail_streak) " failed in a row, failing from " (kairos_core::job::FAILING_AFTER) ")" } }
                            }
                        }
                    }
                    dt { "Last result" } dd id="job-last-result" { (super::jobs::last_result_cell(&job)) }
                    dt { "Handler" } dd { code { (job.handler) } }
                    dt { "Schedule" } dd id="job-schedule" { (super::jobs::schedule_cell(&job.schedule)) }
                    @if let Some(r) = job.schedule.recurrence() {
                        dt { "Window" } dd { (view::time(r.start_at)) " → " (view::time(r.end_at)) }
                        dt { "Misfire / overlap" } dd { (r.misfire.as_str()) " / " (r.overlap.as_str()) }
                    }
                    dt { "Attempts" } dd { (job.retry.max_attempts) " (backoff " (view::duration(job.retry.backoff_ms as i64)) ")" }
                    dt { "Timeout" } dd { @match job.timeout_ms { Some(t) => { (view::duration(t as i64)) }, None => { span.muted { "none" } } } }
                    dt { "Callback URL" } dd { @match &job.callback_url { Some(u) => { code { (u) } }, None => { span.muted { "none" } } } }
                    dt { "Worker group" } dd { @match &job.worker_group { Some(g) => { code { (g) } }, None => { span.muted { "any" } } } }
                    dt { "Priority" } dd { (job.priority.get()) }
                    @match job.execution_mode {
                        ExecutionMode::Single => {},
                        ExecutionMode::Broadcast => { dt { "Runs" } dd { "on every live worker serving its handler (broadcast)" } },
                        ExecutionMode::Sharded { count } => { dt { "Runs" } dd { (count) " shards per trigger" } },
                    }
                    dt { "Max concurrency" } dd { @match job.max_concurrency { Some(n) => { (n) }, None => { span.muted { "no limit of its own" } } } }
                    dt { "Version" } dd { (job.revision) }
                    dt { "Created / updated" } dd { (view::time(Some(job.created_at))) " / " (view::time(Some(job.updated_at))) }
                }
            }
            section.card aria-labelledby="h-next" {
                h2 id="h-next" { "Next fire times " span.muted { "(" (zone.name()) ")" } }
                @if job.status == kairos_core::job::JobStatus::Paused {
                    p.muted id="paused-fires" { "None while the job is paused: nothing fires until it is resumed." }
                } @else if fires.is_empty() {
                    p.muted { "No trigger is left." }
                } @else {
                    ol.fires { @for t in &fires { li { time datetime=(kairos_core::time::to_rfc3339(*t)) { (view::zoned(*t, &zone)) } } } }
                }
                h2 { "Params" }
                (view::json(&crate::shown::params(state, &job)))
                @if !job.sensitive_params.is_empty() {
                    p.hint { "Also masked: " @for (i, p) in job.sensitive_params.iter().enumerate() { @if i > 0 { ", " } code { (p) } } }
                }
            }
        }
        section aria-labelledby="h-exec" {
            h2 id="h-exec" { "Executions " span.muted { "(newest " (EXECUTIONS_SHOWN) ", live)" } }
            p {
                "Open an execution (its due time) for its attempts, log and events; "
                a href={ "/ui/executions?" (query(&[("filtered", "1"), ("job", &job.id)])) } { "every execution of this job" }
                " is in Executions."
            }
            (live("executions-live", &format!("/ui/jobs/{}/live", job.id), executions))
        }
    };
    view::page(ctx, &job.name, Nav::Jobs, body).into_response()
}

fn actions(ctx: &Ctx, job: &Job, reason: &str) -> Markup {
    if !ctx.can_write() {
        return view::nothing();
    }
    let can = |t: JobTransition| t.allowed_from(job.status);
    let button = |action: &str, label: &str, class: &str| {
        html! {
            button class=(class) type="submit" name="action" value=(action) { (label) }
        }
    };
    html! {
        form.toolbar method="post" action={ "/ui/jobs/" (job.id) "/action" } aria-label="Job actions" {
            (view::csrf(ctx))
            @if can(JobTransition::Claim) { (button("trigger", "Trigger now", "")) }
            @if can(JobTransition::Pause) {
                label.inline for="reason" { "Pause reason" }
                input id="reason" type="text" name="reason" maxlength="500" placeholder="optional" size="24" value=(reason);
                (button("pause", "Pause", ""))
            }
            @if can(JobTransition::Resume) { (button("resume", "Resume", "")) }
            @if !job.status.is_terminal() {
                a.button href={ "/ui/jobs/" (job.id) "/edit" } { "Edit" }
                (button("cancel", "Cancel job…", "danger"))
            }
        }
    }
}

/// `GET /ui/jobs/{id}/live`.
pub(crate) async fn live_region(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Response {
    let job = match state.store.job_get(ctx.tenant(), &id).await {
        Ok(Some(j)) => j,
        Ok(None) => return view::not_found(&ctx, "job"),
        Err(e) => return view::store_error(e),
    };
    match executions_region(&state, &ctx, &job).await {
        Ok(m) => m.into_response(),
        Err(r) => r,
    }
}

async fn executions_region(state: &UiState, ctx: &Ctx, job: &Job) -> Result<Markup, Response> {
    let page = state
        .store
        .executions_list_for_job(ctx.tenant(), &job.id, EXECUTIONS_SHOWN, None)
        .await
        .map_err(view::store_error)?;
    let redactor = crate::shown::redactor(state, job);
    let mut callbacks = Vec::new();
    for e in &page.items {
        let cbs = if e.status.is_terminal() {
            state
                .store
                .callbacks_for_execution(ctx.tenant(), &e.id)
                .await
                .map_err(view::store_error)?
        } else {
            Vec::new()
        };
        callbacks.push(
            cbs.into_iter()
                .map(|cb| crate::shown::callback(&redactor, cb))
                .collect(),
        );
    }
    let items: Vec<Execution> = page
        .items
        .into_iter()
        .map(|e| crate::shown::execution(&redactor, e))
        .collect();
    Ok(html! {
        p.live-status {
            "Job is " (view::job_badge(job.status))
            @if let Some(r) = &job.pause_reason { " (" (r) ")" }
            " · next trigger " (super::jobs::next_cell(job))
            @if job.status != kairos_core::job::JobStatus::Paused && job.next_trigger_at.is_some() { " UTC" }
        }
        (executions_table(ctx, &items, &callbacks))
    })
}

/// Executions with their callbacks (one list per execution, maybe empty).
pub(crate) fn executions_table(
    ctx: &Ctx,
    items: &[Execution],
    callbacks: &[Vec<(Callback, Vec<CallbackAttempt>)>],
) -> Markup {
    html! {
        @if items.is_empty() {
            p.muted { "No executions yet." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Table (scrolls sideways on narrow screens)" {
                table.data.executions {
                    caption.sr-only { "Executions, newest trigger first" }
                    thead { tr {
                        th scope="col" { "Status" } th scope="col" .num { "Attempt" } th scope="col" { "Worker" }
                        th scope="col" { "Scheduled (UTC)" } th scope="col" { "Dispatched" } th scope="col" { "Started" }
                        th scope="col" { "Finished" } th scope="col" .num { "Duration" }
                        th scope="col" { "Output / error" } th scope="col" { "Callbacks" }
                    } }
                    tbody {
                        @for (i, e) in items.iter().enumerate() {
                            tr data-execution=(e.id) {
                                td { (view::exec_badge(e.status)) }
                                td.num { (e.attempt) (view::shard(e.shard)) }
                                td { @match &e.worker_id { Some(w) => { code { (w) } }, None => { span.muted { "—" } } } }
                                td {
                                    a.exec-link href={ "/ui/executions/" (e.id) } {
                                        (view::time(Some(e.scheduled_at)))
                                        span.sr-only { ": attempts, log and events of this execution" }
                                    }
                                }
                                td { (view::time(e.dispatched_at)) }
                                td { (view::time(e.started_at)) }
                                td { (view::time(e.finished_at)) }
                                td.num {
                                    @if let (Some(s), Some(f)) = (e.started_at, e.finished_at) { (view::duration(f - s)) }
                                }
                                td.output {
                                    @if let Some(err) = &e.error { span.error-text { (err) } }
                                    @else if let Some(o) = &e.output { code { (truncate(&o.to_string(), 200)) } }
                                }
                                td { (callback_cell(ctx, e, callbacks.get(i).map(Vec::as_slice).unwrap_or(&[]))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn callback_cell(ctx: &Ctx, e: &Execution, cbs: &[(Callback, Vec<CallbackAttempt>)]) -> Markup {
    let last = cbs.last();
    html! {
        @for (cb, attempts) in cbs {
            details.callback {
                summary { (view::badge(cb.state.as_str())) " " (cb.attempts) " attempt(s)" }
                ul {
                    @for a in attempts {
                        li {
                            "#" (a.attempt) " " (view::time(Some(a.at))) " · "
                            @match a.status_code { Some(c) => { "HTTP " (c) }, None => { "no answer" } }
                            " · " (a.latency_ms) " ms"
                            @if let Some(err) = &a.error { " · " span.error-text { (err) } }
                        }
                    }
                    @if attempts.is_empty() { li.muted { "No attempt yet." } }
                }
            }
        }
        @if let Some((cb, _)) = last {
            @if ctx.can_write() && cb.state != CallbackState::Pending {
                form method="post" action={ "/ui/executions/" (e.id) "/redeliver" } {
                    (view::csrf(ctx))
                    input type="hidden" name="job" value=(e.job_id);
                    button.small type="submit" { "Redeliver" span.sr-only { " the callback of execution " (e.id) } }
                }
            }
        }
    }
}

/// `POST /ui/jobs/{id}/action`: trigger, pause, resume or (confirmed)
/// cancel, through the API.
pub(crate) async fn action(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    form: Fields,
) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let action = form.get("action");
    let body = (action == "pause")
        .then(|| form.opt("reason"))
        .flatten()
        .map(|r| serde_json::json!({ "reason": r }));
    // The id as one path segment, in the API's address and in the page's
    // (a decoded id may hold `/`, `?` or a line break).
    let seg = crate::api::segment(&id);
    let (method, path, done) = match action {
        "trigger" => (
            Method::POST,
            format!("/openapi/jobs/{seg}/trigger"),
            Notice::Triggered,
        ),
        "pause" => (
            Method::POST,
            format!("/openapi/jobs/{seg}/pause"),
            Notice::Paused,
        ),
        "resume" => (
            Method::POST,
            format!("/openapi/jobs/{seg}/resume"),
            Notice::Resumed,
        ),
        "cancel" => (
            Method::DELETE,
            format!("/openapi/jobs/{seg}"),
            Notice::Cancelled,
        ),
        _ => {
            return Redirect::to(&format!(
                "/ui/jobs/{seg}?{}",
                error_query(&ctx, "Unknown action.")
            ))
            .into_response();
        }
    };
    if action == "cancel" && form.get("confirm") != "yes" {
        return confirm_cancel(&state, &ctx, &id).await;
    }
    match state
        .api
        .call(ctx.key(), method, &path, body.as_ref())
        .await
    {
        Ok(_) => Redirect::to(&format!("/ui/jobs/{seg}?{}", query(&[done.pair()]))).into_response(),
        // A refused pause shows the page again in place, its reason as
        // typed (a redirect would lose it).
        Err(e) if action == "pause" => {
            let said = html! { p.error-box role="alert" { (e.message) } };
            let mut res = render(&state, &ctx, &id, said, form.get("reason")).await;
            if res.status().is_success() {
                *res.status_mut() = e.status;
            }
            res
        }
        Err(e) => Redirect::to(&format!("/ui/jobs/{seg}?{}", error_query(&ctx, &e.message)))
            .into_response(),
    }
}

async fn confirm_cancel(state: &UiState, ctx: &Ctx, id: &str) -> Response {
    let job = match state.store.job_get(ctx.tenant(), id).await {
        Ok(Some(j)) => j,
        Ok(None) => return view::not_found(ctx, "job"),
        Err(e) => return view::store_error(e),
    };
    view::page(ctx, "Cancel this job?", Nav::Jobs, html! {
        p { "Cancel " strong { (job.name) } " " code { (job.id) } " (" (view::job_badge(job.status)) ")? "
            "It will not fire again; pending executions are cancelled and running ones are asked to stop. This cannot be undone." }
        form.toolbar method="post" action={ "/ui/jobs/" (job.id) "/action" } {
            (view::csrf(ctx))
            input type="hidden" name="action" value="cancel";
            input type="hidden" name="confirm" value="yes";
            button.primary.danger type="submit" { "Yes, cancel the job" }
            a href={ "/ui/jobs/" (job.id) } { "No, keep it" }
        }
    }).into_response()
}

/// `POST /ui/executions/{id}/redeliver`: a new delivery of the execution's
/// latest callback, through the API.
pub(crate) async fn redeliver(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    form: Fields,
) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let segment = crate::api::segment;
    let back = match form.opt("job") {
        _ if form.get("back") == "execution" => format!("/ui/executions/{}", segment(&id)),
        Some(job) => format!("/ui/jobs/{}", segment(job)),
        None => "/ui/executions".to_string(),
    };
    let path = format!("/openapi/executions/{}/callbacks/redeliver", segment(&id));
    let q = match state.api.call(ctx.key(), Method::POST, &path, None).await {
        Ok(_) => query(&[Notice::Redelivered.pair()]),
        Err(e) => error_query(&ctx, &e.message),
    };
    Redirect::to(&format!("{back}?{q}")).into_response()
}
