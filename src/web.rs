//! What `kairos api` and `kairos dev` serve on their HTTP address: the REST
//! API and, at `/ui`, the web dashboard over the same state.

use kairos_api::AppState;
use std::future::Future;

/// The API's router with the dashboard merged in.
pub fn app(state: AppState) -> axum::Router {
    kairos_api::router(state.clone()).merge(kairos_ui::router(state))
}

/// Serves [`app`] on `listener` until `shutdown` resolves, then finishes the
/// requests in flight. Each request carries its peer address, which the API
/// counts failed authentications against.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = app(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
