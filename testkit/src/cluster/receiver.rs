//! A local HTTP endpoint for the callbacks a test receives.

/// Serves `app` on a free loopback port in the background and returns the
/// URL of `path` on it.
pub async fn serve(app: axum::Router, path: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the callback receiver");
    let url = format!(
        "http://{}{path}",
        listener.local_addr().expect("receiver address")
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}
