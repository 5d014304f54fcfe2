//! The page shell (navigation, session bar, live-update banner) and the
//! pieces every page uses: status badges, times, error pages.

use crate::session::Ctx;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::TimeZone;
use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::store::StoreError;
use kairos_core::time::Millis;
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// Navigation entries: (path, label, who sees it).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Nav {
    Overview,
    Jobs,
    NewJob,
    Executions,
    Workers,
    Keys,
    Audit,
    None,
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="color-scheme" content="light dark";
            // htmx reads its settings here (JSON, not script): no inline
            // indicator styles and no eval, so the strict CSP holds.
            meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0,"timeout":5000}"#;
            title { (title) " · Kairos" }
            link rel="stylesheet" href="/ui/assets/app.css";
            script src="/ui/assets/htmx.min.js" defer {}
            script src="/ui/assets/app.js" defer {}
        }
    }
}

/// A page without the navigation (login, refusals).
pub(crate) fn bare_page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body.bare { main.bare-main id="main" { (body) } }
        }
    }
}

/// A full page for a logged-in session.
pub(crate) fn page(ctx: &Ctx, title: &str, active: Nav, body: Markup) -> Markup {
    let link = |nav: Nav, href: &str, label: &str| {
        html! {
            li {
                a href=(href) aria-current=[(nav == active).then_some("page")] { (label) }
            }
        }
    };
    let headers = format!(r#"{{"X-CSRF-Token":"{}"}}"#, ctx.session.csrf);
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body hx-headers=(headers) {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/ui/overview" { span.brand-mark aria-hidden="true" { "◷" } " Kairos" }
                    nav aria-label="Main" {
                        ul {
                            (link(Nav::Overview, "/ui/overview", "Overview"))
                            (link(Nav::Jobs, "/ui/jobs", "Jobs"))
                            @if ctx.can_write() { (link(Nav::NewJob, "/ui/jobs/new", "New job")) }
                            (link(Nav::Executions, "/ui/executions", "Executions"))
                            @if ctx.is_operator() { (link(Nav::Workers, "/ui/workers", "Workers")) }
                            @if ctx.is_admin() {
                                (link(Nav::Keys, "/ui/admin/keys", "API keys"))
                                (link(Nav::Audit, "/ui/admin/audit", "Audit"))
                            }
                        }
                    }
                    div.who {
                        span.tenant title="Tenant" { "tenant " strong { (ctx.tenant()) } }
                        span.role { (ctx.session.role.as_str()) " key " code { (ctx.session.prefix) } }
                        form method="post" action="/ui/logout" {
                            input type="hidden" name="csrf" value=(ctx.session.csrf);
                            button.link type="submit" { "Log out" }
                        }
                    }
                }
                div.banner id="live-lost" role="alert" hidden {
                    "Live updates have lost the server; retrying every 2 s. What you see may be stale."
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// Icon of a state: shown beside its name, never alone.
fn icon(state: &str) -> &'static str {
    match state {
        "succeeded" => "✓",
        "failed" => "✕",
        "timed_out" => "⧖",
        "lost" => "?",
        "running" => "▶",
        "scheduled" => "◷",
        "paused" => "❚❚",
        "cancelled" => "⊘",
        "pending" => "…",
        "dispatched" => "➜",
        "skipped" => "↷",
        "online" => "●",
        "draining" => "◐",
        "offline" => "○",
        "delivered" => "✓",
        "dead" => "✕",
        "failing" => "!",
        "ok" => "✓",
        _ => "•",
    }
}

/// A state as text, icon and colour (the colour comes from its class).
pub(crate) fn badge(state: &str) -> Markup {
    html! {
        span class={ "status s-" (state) } {
            span.icon aria-hidden="true" { (icon(state)) }
            " " (state.replace('_', " "))
        }
    }
}

pub(crate) fn job_badge(s: JobStatus) -> Markup {
    badge(s.as_str())
}

pub(crate) fn exec_badge(s: ExecStatus) -> Markup {
    badge(s.as_str())
}

/// A time in UTC, to the second, machine-readable in `datetime`.
pub(crate) fn time(ms: Option<Millis>) -> Markup {
    match ms.and_then(|ms| chrono::Utc.timestamp_millis_opt(ms).single()) {
        Some(t) => html! {
            time datetime=(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)) {
                (t.format("%Y-%m-%d %H:%M:%S"))
            }
        },
        None => html! { span.muted { "—" } },
    }
}

/// A time in a zone, with its offset.
pub(crate) fn zoned(ms: Millis, tz: &chrono_tz::Tz) -> String {
    tz.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S %:z").to_string())
        .unwrap_or_default()
}

/// A duration for people: `850 ms`, `12.3 s`, `4 min 5 s`.
pub(crate) fn duration(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{} h {} min", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// A notice or error line at the top of a page.
pub(crate) fn flash(notice: Option<&str>, error: Option<&str>) -> Markup {
    html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some(e) = error { p.error-box role="alert" { (e) } }
    }
}

/// A JSON value, pretty-printed in a scrollable block.
pub(crate) fn json(v: &serde_json::Value) -> Markup {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    html! { pre.json { code { (text) } } }
}

/// The answer when the database cannot be read.
pub(crate) fn store_error(e: StoreError) -> Response {
    tracing::warn!(error = %e, "dashboard: store call failed");
    let (status, text) = match e {
        StoreError::Unavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The database cannot be reached right now. Try again in a moment.",
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong reading the data (details are in the server log).",
        ),
    };
    (status, bare_page("Unavailable", html! { p { (text) } })).into_response()
}

/// Not found, the same for an unknown id and another tenant's.
pub(crate) fn not_found(ctx: &Ctx, what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        page(
            ctx,
            "Not found",
            Nav::None,
            html! { p { "No " (what) " with that id in tenant " strong { (ctx.tenant()) } "." } },
        ),
    )
        .into_response()
}

/// Hidden CSRF field for a form.
pub(crate) fn csrf(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name="csrf" value=(ctx.session.csrf); }
}

/// Empty markup, for optional parts.
pub(crate) fn nothing() -> Markup {
    PreEscaped(String::new())
}
