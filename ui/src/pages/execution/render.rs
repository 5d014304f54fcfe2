//! The execution page's parts: the summary, the attempt timeline, the
//! recorded transitions, the callback deliveries and a log line.

use super::attempts::Attempt;
use crate::session::Ctx;
use crate::view;
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::job::Job;
use kairos_core::store::StoredLogLine;
use kairos_core::time::Millis;
use maud::{Markup, html};

/// State, job, times, progress, error and output.
pub(super) fn summary(exec: &Execution, job: Option<&Job>, now: Millis) -> Markup {
    let run = exec.started_at.map(|s| exec.finished_at.unwrap_or(now) - s);
    html! {
        div.cards {
            section.card aria-labelledby="h-state" {
                h2 id="h-state" { "State" }
                dl.props {
                    dt { "Status" } dd id="execution-status" { (view::exec_badge(exec.status)) }
                    dt { "Job" } dd {
                        a href={ "/ui/jobs/" (exec.job_id) } { (job.map_or(exec.job_id.as_str(), |j| j.name.as_str())) }
                    }
                    @if let Some(j) = job { dt { "Handler" } dd { code { (j.handler) } } }
                    dt { "Attempt" } dd {
                        (exec.attempt)
                        @if let Some(j) = job { " of " (j.retry.max_attempts) }
                    }
                    @if exec.shard.is_fanned_out() {
                        dt { "Shard" } dd id="execution-shard" {
                            (exec.shard.index) " of " (exec.shard.count)
                            span.muted { " (index from 0; the trigger ends with its last shard)" }
                        }
                    }
                    dt { "Worker" } dd { @match &exec.worker_id { Some(w) => { code { (w) } }, None => { span.muted { "—" } } } }
                    dt { "Id" } dd { code { (exec.id) } }
                }
            }
            section.card aria-labelledby="h-times" {
                h2 id="h-times" { "Times " span.muted { "(UTC, current attempt)" } }
                dl.props {
                    dt { "Due" } dd { (view::time(Some(exec.scheduled_at))) }
                    dt { "Dispatched" } dd { (view::time(exec.dispatched_at)) }
                    dt { "Started" } dd { (view::time(exec.started_at)) }
                    dt { "Finished" } dd { (view::time(exec.finished_at)) }
                    dt { "Run time" } dd {
                        @match run { Some(ms) => { (view::duration(ms.max(0))) @if exec.finished_at.is_none() { " so far" } }, None => { span.muted { "—" } } }
                    }
                    @if let Some(p) = exec.progress {
                        dt { "Progress" } dd { meter min="0" max="100" value=(p) aria-label="Progress" {} " " (format!("{p:.0}")) " %" }
                    }
                    @if let Some(t) = exec.stop_requested_at { dt { "Stop requested" } dd { (view::time(Some(t))) } }
                }
            }
        }
        @if let Some(err) = &exec.error {
            section.card.wide aria-labelledby="h-error" {
                h2 id="h-error" { "Error" @if !exec.status.is_terminal() { span.muted { " (of the previous attempt)" } } }
                pre.error-text.message { (err) }
            }
        }
        @if let Some(out) = &exec.output {
            section.card.wide aria-labelledby="h-output" {
                h2 id="h-output" { "Output" }
                (view::json(out))
            }
        }
    }
}

/// One entry per attempt, oldest first.
pub(super) fn timeline(exec: &Execution, attempts: &[Attempt], now: Millis) -> Markup {
    html! {
        section aria-labelledby="h-attempts" {
            h2 id="h-attempts" { "Attempts" }
            ol.timeline {
                @for a in attempts {
                    li.attempt data-attempt=(a.number) {
                        h3 { "Attempt " (a.number) " " (view::exec_badge(a.status)) }
                        dl.props {
                            dt { "Worker" } dd { @match &a.worker { Some(w) => { code { (w) } }, None => { span.muted { "none yet" } } } }
                            dt { "Queued" } dd { (view::time(a.queued_at)) }
                            dt { "Dispatched" } dd { (view::time(a.dispatched_at)) }
                            dt { "Started" } dd { (view::time(a.started_at)) }
                            dt { "Ended" } dd { (view::time(a.ended_at)) }
                            dt { "Run time" } dd {
                                @match a.run_time(now) { Some(ms) => { (view::duration(ms)) @if a.live() { " so far" } }, None => { span.muted { "—" } } }
                            }
                        }
                        @if let Some(err) = &a.error {
                            div.attempt-error { span.sr-only { "Error: " } pre.error-text.message { (err) } }
                        }
                        @if a.number == exec.attempt && exec.output.is_some() {
                            p.muted { "Its output is shown above." }
                        }
                    }
                }
            }
        }
    }
}

/// Every recorded transition, oldest first.
pub(super) fn events(events: &[ExecEvent]) -> Markup {
    html! {
        section aria-labelledby="h-events" {
            h2 id="h-events" { "Events" }
            @if events.is_empty() {
                p.muted { "No transition recorded." }
            } @else {
                div.scroll tabindex="0" role="region" aria-label="Events" {
                    table.data.stack {
                        caption.sr-only { "Transitions, oldest first" }
                        thead { tr {
                            th scope="col" { "When (UTC)" } th scope="col" .num { "Attempt" }
                            th scope="col" { "State" } th scope="col" { "Worker" } th scope="col" { "Error" }
                        } }
                        tbody {
                            @for e in events {
                                tr {
                                    th scope="row" { (view::time(Some(e.at))) }
                                    td.num data-label="Attempt" { (e.attempt) }
                                    td data-label="State" { (view::exec_badge(e.status)) }
                                    td data-label="Worker" { @if let Some(w) = &e.worker_id { code { (w) } } }
                                    td.output data-label="Error" { @if let Some(err) = &e.error { span.error-text { (err) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The callback deliveries with every attempt, and redelivery.
pub(super) fn callbacks(
    ctx: &Ctx,
    exec: &Execution,
    cbs: &[(Callback, Vec<CallbackAttempt>)],
) -> Markup {
    let last = cbs.last();
    html! {
        section aria-labelledby="h-callbacks" {
            h2 id="h-callbacks" { "Callback deliveries" }
            @if cbs.is_empty() {
                p.muted {
                    @if exec.status.is_terminal() { "None: the job has no callback URL." }
                    @else { "A delivery is queued when the execution ends, if the job has a callback URL." }
                }
            } @else {
                div.scroll tabindex="0" role="region" aria-label="Callback deliveries" {
                    table.data.stack {
                        caption.sr-only { "Deliveries, oldest first, with their attempts" }
                        thead { tr {
                            th scope="col" { "Delivery" } th scope="col" { "State" } th scope="col" { "URL" }
                            th scope="col" { "Attempts" }
                        } }
                        tbody {
                            @for (cb, attempts) in cbs {
                                tr data-delivery=(cb.id) {
                                    th scope="row" { code { (cb.id) } br; span.muted { "queued " (view::time(Some(cb.created_at))) } }
                                    td data-label="State" { (view::badge(cb.state.as_str())) }
                                    td.output data-label="URL" { code { (cb.url) } }
                                    td data-label="Attempts" {
                                        @if attempts.is_empty() { span.muted { "No attempt yet." } }
                                        ul.attempts {
                                            @for a in attempts {
                                                li {
                                                    "#" (a.attempt) " " (view::time(Some(a.at))) " · "
                                                    @match a.status_code { Some(c) => { "HTTP " (c) }, None => { "no answer" } }
                                                    " · " (a.latency_ms) " ms"
                                                    @if let Some(err) = &a.error { " · " span.error-text { (err) } }
                                                }
                                            }
                                        }
                                        @if cb.state == CallbackState::Pending && cb.attempts > 0 {
                                            span.muted { "Next attempt " (view::time(Some(cb.next_attempt_at))) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if let Some((cb, _)) = last {
                    @if ctx.can_write() && cb.state != CallbackState::Pending {
                        form.toolbar method="post" action={ "/ui/executions/" (exec.id) "/redeliver" } {
                            (view::csrf(ctx))
                            input type="hidden" name="back" value="execution";
                            button.small type="submit" { "Redeliver the callback" }
                        }
                    }
                }
            }
        }
    }
}

/// One log line as a table row.
pub(super) fn log_row(l: &StoredLogLine) -> Markup {
    html! {
        tr data-seq=(l.seq) {
            td { (view::time(Some(l.at))) }
            td.num { (l.attempt) }
            td { span class={ "level l-" (l.level.as_str()) } { (l.level.as_str()) } }
            td.message { (l.message) }
        }
    }
}
