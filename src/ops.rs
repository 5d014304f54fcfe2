//! The operations endpoint of the dispatcher, worker and relay processes:
//! `GET /metrics` (Prometheus text), `GET /healthz` (the process is up) and
//! `GET /readyz` (its dependencies answer), on `KAIROS_METRICS_ADDR`.
//!
//! The API serves the same three paths on its own port, with the same body
//! shapes; `kairos dev` serves them there too.

use anyhow::{Context, Result};
use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kairos_api::ReadyCheck;
use kairos_core::broker::Broker;
use kairos_core::coord::OnceGuard;
use kairos_core::store::Health;
use kairos_core::supervise::{CriticalTasks, spawn_critical};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// A dependency slower than this counts as down: a probe must answer quickly.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Histogram buckets in seconds, shared by every duration histogram: from a
/// millisecond (publish confirms, lateness) to five minutes (long handlers).
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Installs the process-wide Prometheus recorder and keeps its histograms
/// drained. Histograms get real buckets (not summaries), so dashboards can
/// aggregate quantiles across instances.
pub fn install_prometheus() -> Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets(BUCKETS)
        .and_then(|b| b.install_recorder())
        .map_err(|e| anyhow::anyhow!("cannot set up metrics: {e}"))?;
    let upkeep = handle.clone();
    spawn_critical("metrics upkeep", async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// The database, for `/readyz`.
pub struct StoreCheck(pub Arc<dyn Health>);

#[async_trait]
impl ReadyCheck for StoreCheck {
    fn name(&self) -> &str {
        "database"
    }
    async fn check(&self) -> Result<(), String> {
        self.0.ping().await.map_err(|e| e.to_string())
    }
}

/// RabbitMQ (or the in-process broker), for `/readyz`.
pub struct BrokerCheck(pub Arc<dyn Broker>);

#[async_trait]
impl ReadyCheck for BrokerCheck {
    fn name(&self) -> &str {
        "broker"
    }
    async fn check(&self) -> Result<(), String> {
        if self.0.is_healthy().await {
            Ok(())
        } else {
            Err("the message broker does not answer".into())
        }
    }
}

/// Redis (or the in-process coordination), for `/readyz`.
pub struct CoordCheck(pub Arc<dyn OnceGuard>);

#[async_trait]
impl ReadyCheck for CoordCheck {
    fn name(&self) -> &str {
        "coordination"
    }
    async fn check(&self) -> Result<(), String> {
        if self.0.is_healthy().await {
            Ok(())
        } else {
            Err("the lock service does not answer".into())
        }
    }
}

/// The process's long-lived tasks, for `/readyz`: unready once one ended.
pub struct TasksCheck(pub CriticalTasks);

#[async_trait]
impl ReadyCheck for TasksCheck {
    fn name(&self) -> &str {
        "tasks"
    }
    async fn check(&self) -> Result<(), String> {
        self.0.check()
    }
}

#[derive(Clone)]
struct Ops {
    prometheus: PrometheusHandle,
    checks: Arc<[Arc<dyn ReadyCheck>]>,
}

/// Serves the operations endpoint on `addr` until `shutdown`, if `addr` is
/// set; the listener is bound before returning so a bad address fails start-up.
pub async fn serve(
    addr: Option<String>,
    prometheus: PrometheusHandle,
    checks: Vec<Arc<dyn ReadyCheck>>,
    shutdown: CancellationToken,
) -> Result<()> {
    let Some(addr) = addr else {
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (KAIROS_METRICS_ADDR)"))?;
    info!(addr = %listener.local_addr()?, "metrics and health endpoint listening");
    let app = router(Ops {
        prometheus,
        checks: checks.into(),
    });
    spawn_critical("operations endpoint", async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "the metrics endpoint stopped");
        }
    });
    Ok(())
}

fn router(ops: Ops) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ops)
}

async fn metrics(State(ops): State<Ops>) -> Response {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        ops.prometheus.render(),
    )
        .into_response()
}

async fn healthz() -> Response {
    axum::Json(serde_json::json!({"status": "ok"})).into_response()
}

async fn readyz(State(ops): State<Ops>) -> Response {
    let results = futures::future::join_all(ops.checks.iter().map(|c| async move {
        let answer = tokio::time::timeout(CHECK_TIMEOUT, c.check())
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {CHECK_TIMEOUT:?}")));
        (c.name().to_string(), answer)
    }))
    .await;
    let mut checks = BTreeMap::new();
    let mut failing = Vec::new();
    for (name, answer) in results {
        let text = match answer {
            Ok(()) => "ok".to_string(),
            Err(e) => {
                warn!(dependency = %name, error = %e, "readiness check failed");
                failing.push(format!("{name} ({e})"));
                e
            }
        };
        checks.insert(name, text);
    }
    if failing.is_empty() {
        let body = serde_json::json!({"status": "ready", "checks": checks});
        return (StatusCode::OK, axum::Json(body)).into_response();
    }
    let body = serde_json::json!({
        "status": "unavailable",
        "checks": checks,
        "error": {"code": "unavailable", "message": format!("not ready: {}", failing.join(", "))},
    });
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves the endpoint with `checks` on a free port; its address.
    async fn serving(checks: Vec<Arc<dyn ReadyCheck>>) -> std::net::SocketAddr {
        let prometheus = PrometheusBuilder::new().build_recorder().handle();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(Ops {
            prometheus,
            checks: checks.into(),
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    async fn readyz(addr: std::net::SocketAddr) -> (u16, serde_json::Value) {
        let res = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    #[tokio::test]
    async fn readyz_goes_unready_when_a_critical_task_returns() {
        let tasks = CriticalTasks::new();
        let stop = CancellationToken::new();
        let _lasting = tasks.spawn("results consumer", stop.clone().cancelled_owned());
        let addr = serving(vec![Arc::new(TasksCheck(tasks.clone()))]).await;
        let (status, body) = readyz(addr).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["checks"]["tasks"], "ok");

        // A loop that returns while the process runs on, as after a bug.
        tasks.spawn("reaper", async {}).await.unwrap();
        let (status, body) = readyz(addr).await;
        assert_eq!(status, 503, "{body}");
        let why = body["checks"]["tasks"].as_str().unwrap();
        assert!(why.contains("reaper"), "{body}");
        assert!(!why.contains("results consumer"), "{body}");
        stop.cancel();
    }
}
