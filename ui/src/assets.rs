//! The dashboard's static files, compiled into the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

/// htmx 2.0.11, 0BSD licence (see `assets/htmx.LICENSE`), unmodified.
const HTMX: &str = include_str!("../assets/htmx.min.js");
const APP_JS: &str = include_str!("../assets/app.js");
/// The execution page's log tail.
const TAIL_JS: &str = include_str!("../assets/tail.js");
const APP_CSS: &str = include_str!("../assets/app.css");
/// Keyboard shortcuts (`/`, `g j`, `g e`, `g o`, `?`).
const KEYS_JS: &str = include_str!("../assets/keys.js");
/// The tab icon: a clock face, as SVG.
const FAVICON: &str = include_str!("../assets/favicon.svg");

/// `GET /ui/assets/{file}`.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "tail.js" => (TAIL_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        "keys.js" => (KEYS_JS, "text/javascript; charset=utf-8"),
        "favicon.svg" => (FAVICON, "image/svg+xml"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            // Revalidated each load: a new binary must not run old scripts.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /favicon.ico`: browsers ask for it on any page of the host (the
/// API's JSON pages too); it is the dashboard's icon.
pub(crate) async fn favicon() -> Redirect {
    Redirect::permanent("/ui/assets/favicon.svg")
}
