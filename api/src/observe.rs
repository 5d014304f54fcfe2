//! Request metrics: a counter by route, method and status class, and a
//! latency histogram by route, for `/metrics`.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;

/// Counts every request. Routes are labelled by their template
/// (`/openapi/jobs/{id}`), never the raw path, so ids cannot explode the
/// label set; unmatched paths share one label.
pub(crate) async fn count_requests(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = req.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(req).await;
    let class = format!("{}xx", response.status().as_u16() / 100);
    metrics::counter!(
        "kairos_api_requests_total",
        "route" => route.clone(),
        "method" => method,
        "status" => class
    )
    .increment(1);
    metrics::histogram!("kairos_api_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
