//! What `kairos api` and `kairos dev` serve on their HTTP address: the REST
//! API and, at `/ui`, the web dashboard over the same state.

use kairos_api::AppState;
use std::future::Future;

/// The API's router with the dashboard merged in.
pub fn app(state: AppState) -> axum::Router {
    kairos_api::router(state.clone()).merge(kairos_ui::router(state))
}

/// Serves [`app`] on `listener` until `shutdown` resolves, then finishes the
/// requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}
