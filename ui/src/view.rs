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
    Workflows,
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
            link rel="icon" href="/ui/assets/favicon.svg" type="image/svg+xml";
            link rel="stylesheet" href="/ui/assets/app.css";
            script src="/ui/assets/htmx.min.js" defer {}
            script src="/ui/assets/app.js" defer {}
            script src="/ui/assets/keys.js" defer {}
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
                    a.brand href="/ui/overview" { (brand_mark()) " Kairos" }
                    nav aria-label="Main" {
                        ul {
                            (link(Nav::Overview, "/ui/overview", "Overview"))
                            (link(Nav::Jobs, "/ui/jobs", "Jobs"))
                            @if ctx.can_write() { (link(Nav::NewJob, "/ui/jobs/new", "New job")) }
                            (link(Nav::Executions, "/ui/executions", "Executions"))
                            (link(Nav::Workflows, "/ui/workflows", "Workflows"))
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
                        // Shown by keys.js: without script there are no shortcuts to list.
                        button.link type="button" data-shortcuts-open="" hidden { "Shortcuts" }
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
                (shortcuts_help())
            }
        }
    }
}

/// The brand mark: a clock face, drawn (no font needed).
pub(crate) fn brand_mark() -> Markup {
    html! {
        svg.brand-mark viewBox="0 0 16 16" width="1.1em" height="1.1em" aria-hidden="true"
            focusable="false" fill="none" stroke="currentColor" stroke-width="1.8"
            stroke-linecap="round" stroke-linejoin="round" {
            circle cx="8" cy="8" r="6.2" {}
            path d="M8 4.6V8l2.4 1.6" {}
        }
    }
}

/// The shape of a state's icon, as SVG path data on a 16×16 grid, and
/// whether it is filled (else stroked). Drawn rather than taken from a font:
/// a glyph a font lacks (⧖ on a stock Debian box) shows as an empty box.
fn icon_shape(state: &str) -> (&'static str, bool) {
    match state {
        "succeeded" | "delivered" | "ok" => ("M3 8.5l3.2 3.2L13 4.8", false),
        "failed" | "dead" => ("M4.2 4.2l7.6 7.6M11.8 4.2l-7.6 7.6", false),
        "timed_out" | "expired" => (
            "M4 2.2h8M4 13.8h8M5 2.5c0 3.2 6 3.3 6 5.5s-6 2.3-6 5.5M11 2.5c0 3.2-6 3.3-6 5.5s6 2.3 6 5.5",
            false,
        ),
        "failing" => ("M8 3v6.2M8 12.4v.1", false),
        "lost" => (
            "M8 14.2a6.2 6.2 0 1 0 0-12.4 6.2 6.2 0 0 0 0 12.4zM6.2 6.3a1.9 1.9 0 1 1 2.6 1.8c-.5.2-.8.6-.8 1.1v.5M8 11.4v.1",
            false,
        ),
        "running" => ("M5 3.2l8 4.8-8 4.8z", true),
        "scheduled" => (
            "M8 14.2a6.2 6.2 0 1 0 0-12.4 6.2 6.2 0 0 0 0 12.4zM8 4.6V8l2.4 1.6",
            false,
        ),
        "paused" => ("M5.5 3.5v9M10.5 3.5v9", false),
        "cancelled" | "revoked" => (
            "M8 14.2a6.2 6.2 0 1 0 0-12.4 6.2 6.2 0 0 0 0 12.4zM3.6 12.4l8.8-8.8",
            false,
        ),
        "pending" => ("M3.5 8h.1M8 8h.1M12.5 8h.1", false),
        "dispatched" => ("M2.5 8h10M9 4.5L12.5 8 9 11.5", false),
        "skipped" => ("M2.5 11.5a5.5 5.5 0 0 1 10-3.2M12.8 4.2v4.3H8.5", false),
        "online" | "active" => ("M8 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8z", true),
        "draining" => ("M8 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM8 4v8", false),
        "offline" => ("M8 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8z", false),
        _ => ("M8 10a2 2 0 1 0 0-4 2 2 0 0 0 0 4z", true),
    }
}

/// Icon of a state, as inline SVG: shown beside its name, never alone.
pub(crate) fn icon(state: &str) -> Markup {
    let (d, filled) = icon_shape(state);
    html! {
        svg.icon viewBox="0 0 16 16" width="1em" height="1em" aria-hidden="true" focusable="false"
            fill=(if filled { "currentColor" } else { "none" }) stroke="currentColor"
            stroke-width=(if state == "paused" || state == "pending" { "2.6" } else { "1.8" })
            stroke-linecap="round" stroke-linejoin="round" {
            path d=(d) {}
        }
    }
}

/// A state as text, icon and colour (the colour comes from its class).
pub(crate) fn badge(state: &str) -> Markup {
    labelled_badge(state, &state.replace('_', " "))
}

/// A badge coloured and drawn as `state`, reading `label` (key states:
/// "active" in the colours of a live thing, "revoked", "expired").
pub(crate) fn labelled_badge(state: &str, label: &str) -> Markup {
    html! {
        span class={ "status s-" (state) } {
            (icon(state))
            " " (label)
        }
    }
}

/// The keyboard shortcuts' help, opened with `?` by `assets/keys.js` (a
/// closed dialog is never shown, so without script nothing appears).
fn shortcuts_help() -> Markup {
    let row = |keys: &[&str], what: &str| {
        html! {
            div {
                dt { @for (i, k) in keys.iter().enumerate() { @if i > 0 { " then " } kbd { (k) } } }
                dd { (what) }
            }
        }
    };
    html! {
        dialog.shortcuts id="shortcuts" aria-labelledby="shortcuts-h" {
            h2 id="shortcuts-h" { "Keyboard shortcuts" }
            dl {
                (row(&["/"], "Search jobs (the filter of this page, if it has one)"))
                (row(&["g", "o"], "Go to the overview"))
                (row(&["g", "j"], "Go to the jobs"))
                (row(&["g", "e"], "Go to the executions"))
                (row(&["?"], "Show or hide this help"))
                (row(&["Esc"], "Close this help"))
            }
            p.hint { "Shortcuts are off while you type in a field." }
            button type="button" data-shortcuts-close="" { "Close" }
        }
    }
}

pub(crate) fn job_badge(s: JobStatus) -> Markup {
    badge(s.as_str())
}

pub(crate) fn exec_badge(s: ExecStatus) -> Markup {
    badge(s.as_str())
}

/// ` shard i/n` after a broadcast or sharded trigger's execution (the index
/// from 0, as `ctx.shard()` gives it to the handler); nothing for a single one.
pub(crate) fn shard(s: kairos_core::shard::Shard) -> Markup {
    html! {
        @if s.is_fanned_out() {
            " " span.muted.shard title="shard index (from 0) / executions of the trigger" {
                "shard " (s.index) "/" (s.count)
            }
        }
    }
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

/// A request no page takes (`400`), as a page saying why; bare, so that it
/// needs neither a session nor the database.
pub(crate) fn bad_request(why: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        bare_page(
            "Bad request",
            html! {
                div.login.not-found {
                    h1 { (brand_mark()) " Bad request" }
                    p { (why) }
                    p { a href="/ui/overview" { "Go to the overview" } }
                }
            },
        ),
    )
        .into_response()
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

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::shard::Shard;

    #[test]
    fn only_a_fanned_out_execution_shows_its_shard() {
        assert_eq!(shard(Shard::SINGLE).into_string(), "");
        let shown = shard(Shard::new(3, 8)).into_string();
        assert!(shown.contains("shard 3/8"), "{shown}");
    }
}
