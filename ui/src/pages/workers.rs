//! Workers (operator keys): state, capacity, active handlers, average cost,
//! CPU idle, the balancer's equal-cost score and heartbeat age; live.

use super::live;
use crate::UiState;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::WorkerInfo;
use maud::{Markup, html};

/// `GET /ui/workers`.
pub(crate) async fn page(State(state): State<UiState>, ctx: Ctx) -> Response {
    if let Err(refused) = ctx.require_operator() {
        return *refused;
    }
    match state.store.workers_list().await {
        Ok(w) => view::page(
            &ctx,
            "Workers",
            Nav::Workers,
            html! {
                p.muted { "Workers are shared by every tenant. The balancer sends work to the online worker with the lowest equal-cost score: active × 10 + average cost (s) + (100 − CPU idle) / 10." }
                (live("workers-live", "/ui/workers/live", table(&w, now_ms())))
            },
        )
        .into_response(),
        Err(e) => view::store_error(e),
    }
}

/// `GET /ui/workers/live`.
pub(crate) async fn live_region(State(state): State<UiState>, ctx: Ctx) -> Response {
    if let Err(refused) = ctx.require_operator() {
        return *refused;
    }
    match state.store.workers_list().await {
        Ok(w) => table(&w, now_ms()).into_response(),
        Err(e) => view::store_error(e),
    }
}

/// The workers table (also on the overview).
pub(crate) fn table(workers: &[WorkerInfo], now: Millis) -> Markup {
    html! {
        @if workers.is_empty() {
            p.muted { "No worker has sent a heartbeat yet." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Table (scrolls sideways on narrow screens)" {
                table.data {
                    caption.sr-only { "Workers" }
                    thead { tr {
                        th scope="col" { "Worker" } th scope="col" { "State" }
                        th scope="col" .num { "Capacity" } th scope="col" .num { "Active" }
                        th scope="col" { "Load" }
                        th scope="col" .num { "Avg cost" } th scope="col" .num { "CPU idle" }
                        th scope="col" .num { "Equal-cost score" } th scope="col" .num { "Heartbeat age" }
                        th scope="col" { "Handlers" }
                    } }
                    tbody {
                        @for w in workers {
                            @let score = WorkerInfo::equal_cost_load(f64::from(w.active), w.avg_cost_ms, w.cpu_idle);
                            tr.worker data-worker=(w.id) {
                                th scope="row" { code { (w.id) } }
                                td { (view::badge(w.state.as_str())) }
                                td.num { (w.capacity) }
                                td.num { (w.active) }
                                td {
                                    meter min="0" max=(w.capacity.max(1)) value=(w.active)
                                        aria-label={ "load of " (w.id) } {}
                                    " " (w.active) "/" (w.capacity)
                                }
                                td.num { (view::duration(w.avg_cost_ms.round() as i64)) }
                                td.num { (format!("{:.0} %", w.cpu_idle)) }
                                td.num { (format!("{score:.2}")) }
                                td.num { (view::duration((now - w.last_heartbeat_at).max(0))) }
                                td {
                                    @match &w.serves.handlers {
                                        Some(h) => { (h.join(", ")) }
                                        None => { span.muted { "all" } }
                                    }
                                    @if let Some(g) = &w.serves.group { " · group " code { (g) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
