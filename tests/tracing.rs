//! A caller's W3C trace context, end to end: a `traceparent` (and
//! `tracestate`) sent with a create is adopted by the API's request span,
//! stored with the job, continued by the dispatcher's span, carried to the
//! worker in the AMQP header, and sent on with the callback request. Without
//! one (or with an invalid one), each execution keeps its own trace.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack};

/// The caller's trace and its span.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const STATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
/// Another caller, for the batch create.
const BATCH_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const BATCH_CALLER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// Headers of one callback request received.
#[derive(Debug, Clone)]
struct Received {
    execution_id: String,
    traceparent: String,
    tracestate: Option<String>,
}

type Seen = Arc<Mutex<Vec<Received>>>;

async fn receive(State(seen): State<Seen>, headers: HeaderMap, body: axum::body::Bytes) {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    seen.lock().unwrap().push(Received {
        execution_id: body["executionId"].as_str().unwrap_or_default().to_string(),
        traceparent: header("traceparent").unwrap_or_default(),
        tracestate: header("tracestate"),
    });
}

async fn start_receiver() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(seen.clone());
    let url = support::receiver::serve(app, "/hook").await;
    (url, seen)
}

/// POSTs `body` to `path` with the given trace headers; the answer's JSON.
async fn post_traced(
    cluster: &Cluster,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut req =
        cluster.authorized(reqwest::Client::new().post(format!("{}{path}", cluster.base)));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.json(body).send().await.expect("POST");
    let status = resp.status().as_u16();
    let json: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(status == 201 || status == 200, "{path}: {status} {json}");
    json
}

/// The one execution id of a job, once it exists.
async fn execution_of(cluster: &Cluster, job: &str) -> String {
    let list = cluster.executions(job).await;
    assert_eq!(list.len(), 1, "one execution: {list:?}");
    list[0]["executionId"].as_str().unwrap().to_string()
}

/// The `span` object of every JSON log line of every process.
fn spans(cluster: &Cluster) -> Vec<Value> {
    cluster
        .names("")
        .iter()
        .flat_map(|n| cluster.log(n).lines().map(String::from).collect::<Vec<_>>())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .map(|v| v["span"].clone())
        .filter(|s| s.is_object())
        .collect()
}

/// The span named `name` logged for `execution`.
fn span_of(spans: &[Value], name: &str, execution: &str) -> Value {
    spans
        .iter()
        .find(|s| s["name"] == name && s["execution_id"] == execution)
        .unwrap_or_else(|| panic!("no {name} span logged for {execution}"))
        .clone()
}

fn trace_of(traceparent: &str) -> &str {
    traceparent.split('-').nth(1).unwrap_or_default()
}

async fn caller_trace_follows_the_job(stack: Stack) {
    let (hook, seen) = start_receiver().await;
    let env = [
        ("KAIROS_LOG_FORMAT", "json"),
        ("KAIROS_LOG", "warn,kairos=debug,tower_http=debug"),
    ];
    let Some(cluster) = Cluster::start_with(stack, 1, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let job = |name: &str| json!({"jobName": name, "jobHandler": "noop", "callbackUrl": hook});
    let traced = post_traced(
        &cluster,
        "/openapi/jobs",
        &job("traced"),
        &[("traceparent", CALLER), ("tracestate", STATE)],
    )
    .await["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let batch = post_traced(
        &cluster,
        "/openapi/jobs/batch",
        &json!({"jobs": [job("batch-0"), job("batch-1")]}),
        &[("traceparent", BATCH_CALLER)],
    )
    .await;
    let batched: Vec<String> = batch["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["job"]["jobId"].as_str().unwrap().to_string())
        .collect();
    let plain = cluster.create_job(job("plain")).await;
    let invalid = post_traced(
        &cluster,
        "/openapi/jobs",
        &job("invalid"),
        &[("traceparent", "00-4BF92F35-nonsense-01")],
    )
    .await["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut all = vec![traced.clone(), plain.clone(), invalid.clone()];
    all.extend(batched.iter().cloned());
    cluster
        .wait_jobs(&all, &["succeeded"], Duration::from_secs(60))
        .await;
    let exec = execution_of(&cluster, &traced).await;
    let plain_exec = execution_of(&cluster, &plain).await;
    let invalid_exec = execution_of(&cluster, &invalid).await;
    let mut batch_execs = Vec::new();
    for b in &batched {
        batch_execs.push(execution_of(&cluster, b).await);
    }
    let callbacks = testkit::wait_for("every callback", Duration::from_secs(30), || async {
        let seen = seen.lock().unwrap().clone();
        (seen.len() >= all.len()).then_some(seen)
    })
    .await;
    let callback = |e: &str| {
        callbacks
            .iter()
            .find(|c| c.execution_id == e)
            .unwrap_or_else(|| panic!("no callback for {e}: {callbacks:?}"))
            .clone()
    };

    // The callback requests carry the caller's trace (and state).
    let cb = callback(&exec);
    assert_eq!(trace_of(&cb.traceparent), CALLER_TRACE, "{cb:?}");
    assert_eq!(cb.tracestate.as_deref(), Some(STATE), "{cb:?}");
    for e in &batch_execs {
        let cb = callback(e);
        assert_eq!(trace_of(&cb.traceparent), BATCH_TRACE, "{cb:?}");
        assert_eq!(cb.tracestate, None, "{cb:?}");
    }
    // Without a (valid) caller trace, each execution keeps its own.
    for e in [&plain_exec, &invalid_exec] {
        let cb = callback(e);
        assert_eq!(trace_of(&cb.traceparent), e.replace('-', ""), "{cb:?}");
        assert_eq!(cb.tracestate, None, "{cb:?}");
    }

    // The spans chain: caller → API request → dispatch → worker attempt.
    let spans = spans(&cluster);
    let request = spans
        .iter()
        .find(|s| s["name"] == "request" && s["parent"] == CALLER)
        .unwrap_or_else(|| panic!("no API request span with the caller's parent"));
    assert_eq!(request["trace_id"], CALLER_TRACE, "{request}");
    let dispatch = span_of(&spans, "dispatch", &exec);
    assert_eq!(dispatch["trace_id"], CALLER_TRACE, "{dispatch}");
    assert_eq!(dispatch["parent"], request["traceparent"], "{dispatch}");
    let attempt = span_of(&spans, "attempt", &exec);
    assert_eq!(attempt["trace_id"], CALLER_TRACE, "{attempt}");
    assert_eq!(attempt["parent"], dispatch["traceparent"], "{attempt}");
    assert_ne!(attempt["traceparent"], dispatch["traceparent"]);
    for e in &batch_execs {
        assert_eq!(span_of(&spans, "attempt", e)["trace_id"], BATCH_TRACE);
    }
    let own = span_of(&spans, "attempt", &plain_exec);
    assert_eq!(own["trace_id"], plain_exec.replace('-', ""), "{own}");
    assert_eq!(span_of(&spans, "dispatch", &plain_exec)["parent"], "");
}

on_both_stacks!(caller_trace_follows_the_job);
