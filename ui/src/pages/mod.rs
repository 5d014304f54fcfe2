//! One module per page; each renders a full page and, where it updates
//! live, the fragment its live region polls.

pub(crate) mod admin;
pub(crate) mod edit;
pub(crate) mod execution;
pub(crate) mod executions;
pub(crate) mod job;
pub(crate) mod job_form;
pub(crate) mod jobs;
pub(crate) mod new_job;
pub(crate) mod overview;
pub(crate) mod workers;

use crate::session::Ctx;
use axum::response::Redirect;
use maud::{Markup, html};

/// `GET /ui`: the overview (the login page when logged out).
pub(crate) async fn home(_ctx: Ctx) -> Redirect {
    Redirect::to("/ui/overview")
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

/// Percent-encodes `pairs` (empty values left out) as a query string.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        s.append_pair(k, v);
    }
    s.finish()
}
