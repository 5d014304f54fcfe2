//! The execution page: what happened to one trigger of a job — its state,
//! output and error; the attempt timeline (each attempt's worker, times and
//! error); the log lines its handler wrote, live-tailed while it runs
//! (`assets/tail.js` polls [`tail`]; without script the page shows the
//! lines as of its load, paged, and a reload shows more); its recorded
//! transitions; and its callback deliveries. Everything but the log is in
//! two live regions refreshed every 2 s (state and attempts above the log,
//! events and callbacks below it). The job's sensitive values are redacted
//! from all of it, the tail included, for every role (`crate::shown`).

mod attempts;
mod render;

use super::live;
use crate::UiState;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::store::StoredLogLine;
use kairos_core::time::{Millis, now_ms, to_rfc3339};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};

/// Log lines read per page (and per tail poll).
const LOG_PAGE: u32 = 1_000;
/// After an execution ends, the tail keeps polling this long: workers send
/// their last lines just before the result, and they are stored a moment
/// later.
const TAIL_GRACE_MS: Millis = 5_000;

/// The page's query: a log page cursor (without script), notices.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PageQuery {
    #[serde(default)]
    logs: String,
    #[serde(default)]
    notice: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    sig: String,
}

/// The tail's query: the last line the page holds.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TailQuery {
    #[serde(default)]
    after: String,
}

/// The execution of the session's tenant, or the answer to give instead.
async fn find(state: &UiState, ctx: &Ctx, id: &str) -> Result<Execution, Response> {
    match state.store.execution_get(ctx.tenant(), id).await {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(view::not_found(ctx, "execution")),
        Err(e) => Err(view::store_error(e)),
    }
}

/// `GET /ui/executions/{id}`.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Response {
    let exec = match find(&state, &ctx, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let (top, history) = match live_content(&state, &ctx, &exec).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let job = match state.store.job_get(ctx.tenant(), &exec.job_id).await {
        Ok(j) => j,
        Err(e) => return view::store_error(e),
    };
    let cursor = Some(q.logs.as_str()).filter(|c| !c.is_empty());
    let logs = match state.store.logs_page(&exec.id, cursor, LOG_PAGE).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    let redactor = crate::shown::redactor_for(&state.sensitive, job.as_ref());
    let lines: Vec<StoredLogLine> = logs
        .items
        .into_iter()
        .map(|l| crate::shown::log_line(&redactor, l))
        .collect();
    let name = job
        .as_ref()
        .map_or(exec.job_id.as_str(), |j| j.name.as_str());
    let all_of_job = format!(
        "/ui/executions?{}",
        super::query(&[("filtered", "1"), ("job", &exec.job_id)])
    );
    let body = html! {
        (crate::flash::shown(&ctx, &q.notice, &q.error, &q.sig))
        div.toolbar {
            a href={ "/ui/jobs/" (exec.job_id) } { "Job " (name) }
            a href=(all_of_job) { "All executions of this job" }
            @if ctx.can_write() {
                form method="post" action="/ui/executions/rerun" {
                    (view::csrf(&ctx))
                    input type="hidden" name="job" value=(exec.job_id);
                    button.small type="submit" { "Run again" }
                }
            }
        }
        (live("execution-live", &format!("/ui/executions/{}/live", exec.id), top))
        (log_section(&exec, &lines, cursor, logs.next_cursor.as_deref()))
        (live("execution-history", &format!("/ui/executions/{}/live?part=history", exec.id), history))
    };
    script_page(&ctx, &format!("Execution of {name}"), body).into_response()
}

/// The page with the tail script, which only this page loads.
fn script_page(ctx: &Ctx, title: &str, body: Markup) -> Markup {
    view::page(
        ctx,
        title,
        Nav::Executions,
        html! {
            (body)
            script src="/ui/assets/tail.js" defer {}
        },
    )
}

/// Which live region a refresh is for.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct LiveQuery {
    #[serde(default)]
    part: String,
}

/// `GET /ui/executions/{id}/live[?part=history]`: a live region's content.
pub(crate) async fn live_region(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<LiveQuery>,
) -> Response {
    let exec = match find(&state, &ctx, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    match live_content(&state, &ctx, &exec).await {
        Ok((top, history)) => if q.part == "history" { history } else { top }.into_response(),
        Err(r) => r,
    }
}

/// The two live regions: state and attempts; events and callbacks.
async fn live_content(
    state: &UiState,
    ctx: &Ctx,
    exec: &Execution,
) -> Result<(Markup, Markup), Response> {
    let events = state
        .store
        .execution_events(ctx.tenant(), &exec.id)
        .await
        .map_err(view::store_error)?;
    let callbacks = state
        .store
        .callbacks_for_execution(ctx.tenant(), &exec.id)
        .await
        .map_err(view::store_error)?;
    let job = state
        .store
        .job_get(ctx.tenant(), &exec.job_id)
        .await
        .map_err(view::store_error)?;
    // Redacted before the attempts are rebuilt, so their errors are too.
    let r = crate::shown::redactor_for(&state.sensitive, job.as_ref());
    let exec = &crate::shown::execution(&r, exec.clone());
    let events: Vec<ExecEvent> = events
        .into_iter()
        .map(|e| crate::shown::event(&r, e))
        .collect();
    let callbacks: Vec<_> = callbacks
        .into_iter()
        .map(|c| crate::shown::callback(&r, c))
        .collect();
    let now = now_ms();
    let attempts = attempts::attempts(exec, &events);
    Ok((
        html! {
            (render::summary(exec, job.as_ref(), now))
            (render::timeline(exec, &attempts, now))
        },
        html! {
            (render::events(&events))
            (render::callbacks(ctx, exec, &callbacks))
        },
    ))
}

fn log_section(
    exec: &Execution,
    lines: &[StoredLogLine],
    cursor: Option<&str>,
    next: Option<&str>,
) -> Markup {
    let after = lines
        .last()
        .map(|l| l.seq.to_string())
        .or(cursor.map(str::to_string))
        .unwrap_or_else(|| "0".into());
    let live = !exec.status.is_terminal();
    let page_link = |c: &str| {
        format!(
            "/ui/executions/{}?{}#h-logs",
            exec.id,
            super::query(&[("logs", c)])
        )
    };
    html! {
        section.log aria-labelledby="h-logs" {
            h2 id="h-logs" { "Log" }
            p.muted {
                "Lines the handler wrote, every attempt, oldest first."
                @if live { " New lines appear as the handler writes them." }
            }
            @if live {
                noscript { p.muted { "Without JavaScript this list does not grow by itself: reload the page for new lines." } }
            }
            div.log-box tabindex="0" role="region" aria-label="Log lines"
                data-tail={ "/ui/executions/" (exec.id) "/tail" } data-after=(after) {
                p.muted id="log-empty" hidden[!lines.is_empty()] { "No log lines" @if live { " yet" } "." }
                table.data.log hidden[lines.is_empty()] {
                    caption.sr-only { "Log lines, oldest first" }
                    thead { tr {
                        th scope="col" { "Time (UTC)" } th scope="col" .num { "Attempt" }
                        th scope="col" { "Level" } th scope="col" { "Message" }
                    } }
                    tbody id="log-lines" {
                        @for l in lines { (render::log_row(l)) }
                    }
                }
            }
            nav.pager aria-label="Log pages" {
                @if cursor.is_some() { a href={ "/ui/executions/" (exec.id) "#h-logs" } { "« First lines" } }
                @if let Some(n) = next { a href=(page_link(n)) rel="next" { "More lines ›" } }
            }
        }
    }
}

/// `GET /ui/executions/{id}/tail?after=<seq>`: the log lines after `seq`,
/// and whether more can come, as JSON for `assets/tail.js`.
pub(crate) async fn tail(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<TailQuery>,
) -> Response {
    let exec = match find(&state, &ctx, &id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let after = q.after.trim();
    let cursor = Some(after).filter(|a| !a.is_empty() && *a != "0");
    let page = match state.store.logs_page(&exec.id, cursor, LOG_PAGE).await {
        Ok(p) => p,
        Err(e) => return view::store_error(e),
    };
    let redactor = match state.store.job_get(ctx.tenant(), &exec.job_id).await {
        Ok(job) => crate::shown::redactor_for(&state.sensitive, job.as_ref()),
        Err(e) => return view::store_error(e),
    };
    let ended_long_ago = exec
        .finished_at
        .is_some_and(|f| now_ms() - f > TAIL_GRACE_MS);
    let done = exec.status.is_terminal() && ended_long_ago && page.next_cursor.is_none();
    let last = page
        .items
        .last()
        .map_or(after.to_string(), |l| l.seq.to_string());
    let lines: Vec<Value> = page
        .items
        .into_iter()
        .map(|l| crate::shown::log_line(&redactor, l))
        .map(|l| {
            json!({
                "seq": l.seq,
                "attempt": l.attempt,
                "at": to_rfc3339(l.at),
                "time": view::zoned(l.at, &chrono_tz::UTC).trim_end_matches(" +00:00"),
                "level": l.level.as_str(),
                "message": l.message,
            })
        })
        .collect();
    Json(json!({
        "lines": lines,
        "after": last,
        "status": exec.status.as_str(),
        "done": done,
    }))
    .into_response()
}
