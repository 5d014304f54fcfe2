//! One module per page; each renders a full page and, where it updates
//! live, the fragment its live region polls.

pub(crate) mod admin;
pub(crate) mod bulk;
pub(crate) mod edit;
pub(crate) mod execution;
pub(crate) mod executions;
pub(crate) mod job;
pub(crate) mod job_form;
pub(crate) mod jobs;
pub(crate) mod new_job;
pub(crate) mod overview;
pub(crate) mod workers;
pub(crate) mod workflow;

use crate::UiState;
use crate::session::{self, Ctx};
use crate::view::{self, Nav};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

/// `GET /ui`: the overview (the login page when logged out).
pub(crate) async fn home(_ctx: Ctx) -> Redirect {
    Redirect::to("/ui/overview")
}

/// Any other address under `/ui/`: an HTML page saying so (with the
/// navigation when logged in), not the API's JSON 404.
pub(crate) async fn unknown(
    State(state): State<UiState>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let path = uri.path();
    let explain = html! {
        p { "There is no page at " code { (path) } " in this dashboard. The address may be mistyped, or the page may have moved." }
    };
    let page = match session::current(&state, &headers).await {
        Ok(Some(ctx)) => view::page(
            &ctx,
            "Page not found",
            Nav::None,
            html! {
                div.not-found {
                    (explain)
                    ul {
                        li { a href="/ui/overview" { "Overview" } }
                        li { a href="/ui/jobs" { "Jobs" } }
                        li { a href="/ui/executions" { "Executions" } }
                        li { a href="/ui/workflows" { "Workflows" } }
                    }
                }
            },
        ),
        // Unknown or failed session alike: the page needs no data.
        Ok(None) | Err(_) => view::bare_page(
            "Page not found",
            html! {
                div.login.not-found {
                    h1 { (view::brand_mark()) " Page not found" }
                    (explain)
                    p { a href="/ui/login" { "Log in to the dashboard" } }
                }
            },
        ),
    };
    (StatusCode::NOT_FOUND, page).into_response()
}

/// A region refreshed from `url` every 2 s while the tab is visible (see
/// `assets/app.js`), announced politely to screen readers.
pub(crate) fn live(id: &str, url: &str, inner: Markup) -> Markup {
    html! {
        div id=(id) data-live="" hx-get=(url) hx-trigger="every 2s, kairos:refresh"
            hx-swap="innerHTML" aria-live="polite" {
            (inner)
        }
    }
}

/// The query string carrying `message` as this session's signed error
/// ([`crate::flash`]).
pub(crate) fn error_query(ctx: &Ctx, message: &str) -> String {
    let [(k1, v1), (k2, v2)] = crate::flash::error_pairs(ctx, message);
    query(&[(k1, &v1), (k2, &v2)])
}

/// Percent-encodes `pairs` (empty values left out) as a query string.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        s.append_pair(k, v);
    }
    s.finish()
}
