//! The operational surface: OpenAPI document, Swagger UI, health, readiness,
//! metrics, workers, and the 503 of an unreachable database.

use super::support::{App, spawn_app_with};
use async_trait::async_trait;
use axum::http::header;
use kairos_api::ReadyCheck;
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::store::WorkerStore;
use kairos_core::time::now_ms;
use kairos_core::worker::WorkerState;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use std::sync::{Arc, OnceLock};

pub async fn openapi_document_and_swagger_ui(app: App) {
    let doc = app.get("/openapi.json").await.ok(200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().expect("paths");
    let expected = [
        ("/openapi/jobs", vec!["post", "get"]),
        ("/openapi/jobs/{id}", vec!["get", "delete"]),
        ("/openapi/jobs/{id}/pause", vec!["post"]),
        ("/openapi/jobs/{id}/resume", vec!["post"]),
        ("/openapi/jobs/{id}/trigger", vec!["post"]),
        ("/openapi/jobs/{id}/executions", vec!["get"]),
        ("/openapi/executions", vec!["get"]),
        ("/openapi/executions/{id}", vec!["get"]),
        ("/openapi/executions/{id}/callbacks", vec!["get"]),
        ("/openapi/executions/{id}/callbacks/redeliver", vec!["post"]),
        ("/openapi/workers", vec!["get"]),
        ("/healthz", vec!["get"]),
        ("/readyz", vec!["get"]),
        ("/metrics", vec!["get"]),
    ];
    for (path, methods) in expected {
        for m in methods {
            assert!(paths[path][m].is_object(), "{m} {path} is not documented");
        }
    }
    let list_params: Vec<_> = paths["/openapi/jobs"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(list_params, ["status", "health", "limit", "cursor"]);
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let job = &schemas["JobView"]["properties"];
    assert_eq!(job["health"]["enum"], json!(["ok", "failing"]));
    assert!(
        job["lastResult"]["enum"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("failed")) && v.contains(&json!(null))),
        "{}",
        job["lastResult"]
    );
    assert_eq!(job["lastResultAt"]["format"], "date-time");
    for name in [
        "CreateJobRequest",
        "CreatedJob",
        "JobDetail",
        "JobView",
        "JobPage",
        "ExecutionPage",
        "ExecutionDetail",
        "CallbackList",
        "CallbackView",
        "CallbackAttemptView",
        "WorkerList",
        "ErrorBody",
    ] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    let required = &schemas["CreateJobRequest"]["required"];
    assert_eq!(required, &json!(["jobName", "jobHandler"]));

    let redirect = app.get("/docs").await;
    assert!(redirect.status.is_redirection(), "{}", redirect.status);
    let ui = app.get("/docs/").await;
    assert_eq!(ui.status, 200);
    let ct = ui.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(
        String::from_utf8_lossy(&ui.body).contains("swagger"),
        "not the Swagger UI page"
    );
}

pub async fn health_and_readiness(app: App) {
    assert_eq!(app.get("/healthz").await.ok(200), json!({"status": "ok"}));
    assert_eq!(
        app.get("/readyz").await.ok(200),
        json!({"status": "ready", "checks": {"database": "ok"}})
    );
    // Without an exporter `/metrics` is a JSON 404.
    app.get("/metrics").await.error(404, "not_found");

    let broken = spawn_app_with(app.store.clone(), |s| {
        s.with_ready_check(Arc::new(Check("redis", Ok(()))))
            .with_ready_check(Arc::new(Check("broker", Err("connection refused".into()))))
    })
    .await;
    let resp = broken.get("/readyz").await;
    assert_eq!(resp.status, 503);
    let body = resp.json();
    assert_eq!(body["status"], "unavailable");
    assert_eq!(
        body["checks"],
        json!({"database": "ok", "redis": "ok", "broker": "connection refused"})
    );
    assert_eq!(body["error"]["code"], "unavailable");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("broker") && !message.contains("redis"),
        "{message}"
    );
}

struct Check(&'static str, Result<(), String>);

#[async_trait]
impl ReadyCheck for Check {
    fn name(&self) -> &str {
        self.0
    }
    async fn check(&self) -> Result<(), String> {
        self.1.clone()
    }
}

/// The process-wide recorder: `metrics` allows one per process.
fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .install_recorder()
                .expect("install recorder")
        })
        .clone()
}

pub async fn metrics_count_requests_by_route(app: App) {
    let handle = prometheus();
    let app = spawn_app_with(app.store.clone(), |s| s.with_prometheus(handle)).await;
    app.get("/healthz").await.ok(200);
    app.get("/openapi/jobs/nope").await.error(404, "not_found");
    let resp = app.get("/metrics").await;
    assert_eq!(resp.status, 200);
    let ct = resp.headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = String::from_utf8_lossy(&resp.body);
    let has = |route: &str, status: &str| {
        text.lines().any(|l| {
            l.starts_with("kairos_api_requests_total")
                && l.contains(&format!("route=\"{route}\""))
                && l.contains(&format!("status=\"{status}\""))
        })
    };
    assert!(has("/healthz", "2xx"), "{text}");
    assert!(has("/openapi/jobs/{id}", "4xx"), "{text}");
}

pub async fn workers_are_listed(app: App) {
    assert_eq!(
        app.get("/openapi/workers").await.ok(200),
        json!({"items": []})
    );
    let now = now_ms();
    let beat = HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: "w-1".into(),
        queue: "kairos.worker.w-1".into(),
        capacity: 8,
        active: 2,
        avg_cost_ms: 12.5,
        cpu_idle: 90.0,
        state: WorkerState::Online,
        at: now,
        handlers: None,
        group: None,
        incarnation: None,
        held: None,
        dispatch_batch: Some(16),
        immediate_queue: false,
    };
    app.store
        .workers_record_heartbeats(&[beat], now)
        .await
        .expect("heartbeat");
    let list = app.get("/openapi/workers").await.ok(200);
    let w = &list["items"][0];
    assert_eq!(w["workerId"], "w-1");
    assert_eq!(w["queue"], "kairos.worker.w-1");
    assert_eq!(w["capacity"], 8);
    assert_eq!(w["active"], 2);
    assert_eq!(w["avgCostMs"], 12.5);
    assert_eq!(w["cpuIdle"], 90.0);
    assert_eq!(w["state"], "online");
    assert_eq!(w["dispatchBatch"], 16);
    assert!(w["lastHeartbeatAt"].is_string() && w["registeredAt"].is_string());
}

pub async fn an_unreachable_database_is_503(app: App) {
    app.store.close().await;
    app.get("/openapi/jobs").await.error(503, "unavailable");
    app.post_json(
        "/openapi/jobs",
        &json!({"jobName": "a", "jobHandler": "noop"}),
    )
    .await
    .error(503, "unavailable");
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status, 503);
    assert!(
        ready.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("database")
    );
}

pub async fn serve_answers_on_a_socket_and_drains_on_shutdown(app: App) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let state = kairos_api::AppState::new(Arc::new(app.store.clone()), Default::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(kairos_api::serve(listener, state, async {
        let _ = stopped.await;
    }));

    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .expect("write request");
    let mut response = String::new();
    conn.read_to_string(&mut response)
        .await
        .expect("read response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with(r#"{"status":"ok"}"#), "{response}");

    stop.send(()).expect("server still running");
    server
        .await
        .expect("server task")
        .expect("serve returns Ok after shutdown");
}
