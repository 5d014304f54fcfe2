//! OTLP export (`KAIROS_OTLP_ENDPOINT`): real processes send their spans to a
//! local OTLP/HTTP receiver, each under its own service name, with the W3C
//! ids that travel in the headers, so the caller's trace links the API, the
//! dispatcher, the worker and the relay. Export is batched; what is left is
//! flushed when a process shuts down.
#![cfg(feature = "otlp")]

use kairos_testkit::cluster as support;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use kairos_testkit as testkit;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use prost::Message;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One span as received: service, name, and W3C ids in hex.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_id: String,
    /// String attributes.
    attrs: HashMap<String, String>,
}

type Seen = Arc<Mutex<Vec<Got>>>;

async fn traces(State(seen): State<Seen>, body: axum::body::Bytes) -> StatusCode {
    let len = body.len();
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        eprintln!("collector: an export of {len} bytes is not OTLP protobuf");
        return StatusCode::BAD_REQUEST;
    };
    let mut seen = seen.lock().unwrap();
    for rs in req.resource_spans {
        let service = strings(rs.resource.iter().flat_map(|r| &r.attributes))
            .remove("service.name")
            .unwrap_or_default();
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            seen.push(Got {
                service: service.clone(),
                attrs: strings(&span.attributes),
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_id: hex(&span.parent_span_id),
            });
        }
    }
    StatusCode::OK
}

/// The string-valued attributes.
fn strings<'a>(attrs: impl IntoIterator<Item = &'a KeyValue>) -> HashMap<String, String> {
    attrs
        .into_iter()
        .filter_map(|a| match a.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some((a.key.clone(), s.clone())),
            _ => None,
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A local OTLP/HTTP receiver; its base URL and what it received.
fn start_collector() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(seen.clone());
    (serve_apart(app), seen)
}

/// Serves `app` on a thread and runtime of its own, so it answers while the
/// test blocks (waiting for a process to exit); its base URL.
fn serve_apart(app: Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await
        })
    });
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn services_export_linked_spans_over_otlp() {
    let (collector, seen) = start_collector();
    let (hook_url, hooks) = start_hook();
    let env = [
        ("KAIROS_OTLP_ENDPOINT", collector.as_str()),
        // Nothing is sent on a timer during the test: every span arrives
        // through the flush at shutdown.
        ("OTEL_BSP_SCHEDULE_DELAY", "3600000"),
    ];
    let Some(mut cluster) = Cluster::start_with(Stack::Services, 1, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let resp = cluster
        .authorized(reqwest::Client::new().post(format!("{}/openapi/jobs", cluster.base)))
        .header("traceparent", CALLER)
        .json(&json!({"jobName": "otlp", "jobHandler": "noop", "callbackUrl": hook_url}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let job = resp.json::<serde_json::Value>().await.unwrap()["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    cluster
        .wait_jobs(
            std::slice::from_ref(&job),
            &["succeeded"],
            Duration::from_secs(60),
        )
        .await;
    let exec = cluster.executions(&job).await[0]["executionId"]
        .as_str()
        .unwrap()
        .to_string();
    testkit::wait_for("the callback", Duration::from_secs(30), || async {
        (*hooks.lock().unwrap() > 0).then_some(())
    })
    .await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing is exported before the flush"
    );
    for name in cluster.names("") {
        cluster.signal(&name, "TERM");
        assert!(cluster.wait_exit(&name), "{name} shut down cleanly");
    }

    let got = seen.lock().unwrap().clone();
    let find = |service: &str, name: &str| {
        got.iter()
            .find(|g| {
                g.service == service
                    && g.name == name
                    && g.trace_id == CALLER_TRACE
                    && (name == "request"
                        || g.attrs.get("execution_id").map(String::as_str) == Some(exec.as_str()))
            })
            .unwrap_or_else(|| {
                panic!("no {name} span from {service} in the caller's trace: {got:#?}")
            })
            .clone()
    };
    let request = find("kairos-api", "request");
    assert_eq!(request.parent_id, CALLER_SPAN, "{request:?}");
    let dispatch = find("kairos-dispatcher", "dispatch");
    assert_eq!(dispatch.parent_id, request.span_id, "{dispatch:?}");
    let attempt = find("kairos-worker", "attempt");
    assert_eq!(attempt.parent_id, dispatch.span_id, "{attempt:?}");
    let callback = find("kairos-callback-relay", "callback");
    assert_eq!(callback.parent_id, request.span_id, "{callback:?}");
    assert_eq!(attempt.attrs.get("job_id"), Some(&job), "{attempt:?}");
    // The API's other requests have traces of their own; its health probes
    // (polled by the harness) are not traced at all.
    assert!(
        got.iter()
            .any(|g| g.name == "request" && g.trace_id != CALLER_TRACE),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .all(|g| g.attrs.get("uri").is_none_or(|u| !u.starts_with("/readyz"))),
        "{got:#?}"
    );
}

/// A callback receiver counting deliveries.
fn start_hook() -> (String, Arc<Mutex<usize>>) {
    let count = Arc::new(Mutex::new(0usize));
    let c = count.clone();
    let app = Router::new().route(
        "/hook",
        post(move || {
            let c = c.clone();
            async move {
                *c.lock().unwrap() += 1;
                StatusCode::OK
            }
        }),
    );
    (format!("{}/hook", serve_apart(app)), count)
}
