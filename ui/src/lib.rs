//! Kairos web dashboard, served at `/ui` by `kairos api` and `kairos dev`.
//!
//! Server-rendered HTML ([maud] templates) with a small vendored script
//! (htmx 2, 0BSD licence, `assets/htmx.min.js`) and a hand-written
//! `assets/app.js`/`assets/app.css` (plus `assets/tail.js`, the execution
//! page's log tail), all compiled into the binary: nothing to build with
//! Node, nothing fetched at run time.
//!
//! # How it reaches the data
//!
//! - **Changes** (create, edit, pause, resume, cancel, trigger, redeliver,
//!   keys, schedule preview) go through the REST API's own router, called
//!   in process as the session's key (named by prefix, module `api`). The
//!   API's validation, role checks, limits, tenant scoping and audit trail
//!   therefore apply unchanged, and its error messages are the ones shown.
//! - **Reads** call the storage port directly (the same
//!   [`kairos_core::store::ApiStore`] the API uses) with the session's tenant,
//!   which every store query names in its `WHERE` clause.
//!
//! # Sessions
//!
//! Logging in with an API key ([`login`]: same-origin posts only, with a
//! login token) stores a session in the database ([`session`]): the browser
//! holds only a random id in an `HttpOnly`, `SameSite=Strict` cookie
//! (`Secure` over HTTPS), the database only the id's hash and the key's
//! prefix, so restarts and other API instances keep the session and no key
//! is kept anywhere. Every change carries the session's CSRF token. Every
//! response carries a strict Content-Security-Policy: scripts and styles only
//! from `/ui/assets`, nothing inline.
//!
//! # Secrets
//!
//! Params values the configuration or the job marks sensitive are shown
//! masked to every role, and redacted from outputs and errors (module
//! `shown`, over [`kairos_core::sensitive`]).
#![warn(missing_docs, unreachable_pub)]

mod api;
mod assets;
mod chart;
mod cron_words;
mod flash;
mod forms;
pub mod login;
mod pages;
pub mod session;
mod shown;
mod view;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{any, get, post};
use kairos_api::AppState;
use kairos_core::store::ApiStore;
use std::sync::Arc;

/// What every page handler shares. Cheap to clone.
#[derive(Clone)]
pub struct UiState {
    pub(crate) store: Arc<dyn ApiStore>,
    pub(crate) api: api::InProcess,
    /// The key names whose params values are masked
    /// ([`kairos_api::ApiConfig::api_sensitive_params`]).
    pub(crate) sensitive: Arc<kairos_core::sensitive::SensitiveKeys>,
    /// When cookies get `Secure` ([`kairos_api::ApiConfig::ui_cookie_secure`]).
    pub(crate) cookie_secure: kairos_api::CookieSecure,
}

/// The Content-Security-Policy of every page: nothing inline, nothing from
/// elsewhere, no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes (all under `/ui`), over the API's `state`; merge it
/// into the API's router.
pub fn router(state: AppState) -> Router {
    let ui = UiState {
        cookie_secure: state.config().ui_cookie_secure,
        store: state.store().clone(),
        sensitive: Arc::new(state.sensitive_keys().clone()),
        api: api::InProcess::new(kairos_api::router(state)),
    };
    Router::new()
        .route("/ui", get(pages::home))
        .route("/ui/", get(pages::home))
        .route("/ui/assets/{file}", get(assets::serve))
        .route("/ui/login", get(login::login_page).post(login::login))
        .route("/ui/logout", post(session::logout))
        .route("/ui/overview", get(pages::overview::page))
        .route("/ui/overview/live", get(pages::overview::live_region))
        .route("/ui/jobs", get(pages::jobs::page))
        .route("/ui/jobs/bulk", post(pages::bulk::bulk))
        .route(
            "/ui/jobs/new",
            get(pages::new_job::page).post(pages::new_job::create),
        )
        .route("/ui/jobs/preview", post(pages::new_job::preview))
        .route("/ui/jobs/{id}", get(pages::job::page))
        .route("/ui/jobs/{id}/live", get(pages::job::live_region))
        .route("/ui/jobs/{id}/action", post(pages::job::action))
        .route(
            "/ui/jobs/{id}/edit",
            get(pages::edit::page).post(pages::edit::save),
        )
        .route("/ui/executions/{id}/redeliver", post(pages::job::redeliver))
        .route("/ui/executions", get(pages::executions::page))
        .route("/ui/executions/rerun", post(pages::executions::rerun))
        .route(
            "/ui/executions/export",
            get(pages::executions::export::export),
        )
        .route("/ui/executions/{id}", get(pages::execution::page))
        .route(
            "/ui/executions/{id}/live",
            get(pages::execution::live_region),
        )
        .route("/ui/executions/{id}/tail", get(pages::execution::tail))
        .route("/ui/workflows", get(pages::workflow::list))
        .route("/ui/workflows/{id}", get(pages::workflow::page))
        .route(
            "/ui/workflows/{id}/runs/{run}",
            get(pages::workflow::run_page),
        )
        .route("/ui/workers", get(pages::workers::page))
        .route("/ui/workers/live", get(pages::workers::live_region))
        .route(
            "/ui/admin/keys",
            get(pages::admin::keys).post(pages::admin::create_key),
        )
        .route("/ui/admin/keys/revoke", post(pages::admin::revoke_key))
        .route("/ui/admin/audit", get(pages::admin::audit))
        .route("/ui/{*rest}", any(pages::unknown))
        .route("/favicon.ico", get(assets::favicon))
        .layer(axum::middleware::from_fn(refuse_nul))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(ui)
}

/// Refuses an address holding a NUL (`%00`) in its path or query before any
/// page sees it: PostgreSQL cannot store or compare text with a NUL, so a
/// lookup by such an id would fail as a server error there while MySQL and
/// SQLite answer "not found". Refused alike on every database, as the API
/// refuses it. Percent-decoding is one pass, so a decoded NUL comes from a
/// literal `%00` and nothing else.
async fn refuse_nul(req: Request, next: Next) -> Response {
    let uri = req.uri();
    let holds_nul = |s: &str| s.as_bytes().windows(3).any(|w| w == b"%00");
    if holds_nul(uri.path()) || uri.query().is_some_and(holds_nul) {
        return view::bad_request(
            "The address holds a NUL character (%00), which no page of this dashboard takes.",
        );
    }
    next.run(req).await
}

/// Adds the CSP and the other browser hardening headers to every response.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        // Pages show one tenant's data: never kept by shared caches.
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}
