//! Kairos REST API: accepts jobs over HTTP, answers status queries and
//! controls jobs, against the roles of the storage port it uses
//! ([`kairos_core::store::ApiStore`]).
//!
//! # Layout
//!
//! - [`config`]: [`ApiConfig`], the API's settings, defaults and validation.
//! - [`error`]: [`ApiError`], the one error type, and its JSON shape.
//! - [`extract`]: extractors whose rejections are [`ApiError`]s.
//! - `body`: reading a body under the size limit so that an oversized one
//!   still gets its 413.
//! - [`dto`]: request and response bodies with their OpenAPI schemas.
//! - [`validate`]: caller input → domain values (`CreateJobRequest` → `NewJob`).
//! - [`auth`]: API keys, the authentication middleware, roles and limits.
//! - `routes`: one file per resource (jobs, control, executions, callbacks,
//!   workers, health).
//! - `openapi`: the document served at `/openapi.json` (Swagger UI at `/docs`).
//! - `observe`: request counting for `/metrics`.
//! - `shown`: what a caller is shown of a job's sensitive params (masked
//!   for read keys, in jobs, executions and logs).
//!
//! [`AppState`] carries the store and configuration; [`router`] builds the
//! app and [`serve`] runs it until a shutdown future resolves.
#![warn(missing_docs, unreachable_pub)]

pub mod auth;
mod body;
pub mod config;
pub mod dto;
pub mod due;
pub mod error;
pub mod extract;
mod observe;
mod openapi;
mod request_trace;
mod routes;
mod shown;
mod ui_cookie;
pub mod validate;
mod waiting;

pub use config::ApiConfig;
pub use error::ApiError;
pub use ui_cookie::{BadCookieSecure, CookieSecure, DEFAULT_UI_COOKIE_SECURE};

use async_trait::async_trait;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use kairos_core::due::Due;
use kairos_core::store::ApiStore;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tower_http::trace::TraceLayer;

/// A dependency `/readyz` checks besides the database (Redis, the broker…).
#[async_trait]
pub trait ReadyCheck: Send + Sync {
    /// Name shown in the readiness body, e.g. `redis`.
    fn name(&self) -> &str;
    /// `Ok` when the dependency answers; otherwise what went wrong.
    async fn check(&self) -> Result<(), String>;
}

/// Called with a job's due time after a create or resume commits, or with
/// [`Due::Pending`] after a trigger left an execution pending, so the leader
/// dispatcher can wake at once instead of at its next scan or sweep.
pub type DueNotifier = Arc<dyn Fn(Due) + Send + Sync>;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub(crate) store: Arc<dyn ApiStore>,
    pub(crate) config: Arc<ApiConfig>,
    pub(crate) ready_checks: Arc<[Arc<dyn ReadyCheck>]>,
    pub(crate) prometheus: Option<PrometheusHandle>,
    pub(crate) notify_due: DueNotifier,
    pub(crate) auth: Arc<auth::AuthState>,
    /// [`ApiConfig::api_sensitive_params`], parsed once.
    pub(crate) sensitive: Arc<kairos_core::sensitive::SensitiveKeys>,
}

impl AppState {
    /// State over `store` with `config`, no extra ready checks, no metrics
    /// exporter and a no-op due notifier.
    pub fn new(store: Arc<dyn ApiStore>, config: ApiConfig) -> Self {
        Self {
            store,
            ready_checks: Arc::from(Vec::new()),
            prometheus: None,
            notify_due: Arc::new(|_| {}),
            auth: Arc::new(auth::AuthState::new(&config)),
            sensitive: Arc::new(config.sensitive_keys()),
            config: Arc::new(config),
        }
    }

    /// Adds a dependency to `/readyz`.
    pub fn with_ready_check(mut self, check: Arc<dyn ReadyCheck>) -> Self {
        let mut checks = self.ready_checks.to_vec();
        checks.push(check);
        self.ready_checks = checks.into();
        self
    }

    /// Serves `handle` at `/metrics` (otherwise `/metrics` is 404).
    pub fn with_prometheus(mut self, handle: PrometheusHandle) -> Self {
        self.prometheus = Some(handle);
        self
    }

    /// Sets the function told about new due times.
    pub fn with_due_notifier(mut self, notify: DueNotifier) -> Self {
        self.notify_due = notify;
        self
    }

    /// The storage port the API serves from (the dashboard reads through it).
    pub fn store(&self) -> &Arc<dyn ApiStore> {
        &self.store
    }

    /// The configuration in use.
    pub fn config(&self) -> &ApiConfig {
        &self.config
    }

    /// The key names whose params values are masked (the dashboard masks
    /// with them too).
    pub fn sensitive_keys(&self) -> &kairos_core::sensitive::SensitiveKeys {
        &self.sensitive
    }

    /// How many times authentication has read a key from the store: what a
    /// flood of unknown keys costs the database.
    pub fn key_store_reads(&self) -> u64 {
        self.auth.keys.store_reads()
    }
}

/// The whole app: every route, the OpenAPI document and Swagger UI, JSON
/// 404/405 fallbacks, the body limit, request metrics and tracing.
pub fn router(state: AppState) -> Router {
    let max_body = state.config.max_body_bytes;
    let (app, doc) = routes::api().split_for_parts();
    app.merge(openapi::swagger_ui(openapi::finish(doc)))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(observe::count_requests))
        .layer(TraceLayer::new_for_http().make_span_with(request_trace::span_for))
        .layer(axum::middleware::from_fn(request_trace::adopt))
        .with_state(state)
}

/// Serves only `GET /metrics` on `listener` (`KAIROS_METRICS_ADDR`), so
/// metrics can be reachable where the API is not, until `shutdown` resolves.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    handle: PrometheusHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(handle))
        .with_graceful_shutdown(shutdown)
        .await
}

fn metrics_router(handle: PrometheusHandle) -> Router {
    Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let handle = handle.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    handle.render(),
                )
            }
        }),
    )
}

/// Serves [`router`] on `listener` until `shutdown` resolves, then finishes
/// the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
