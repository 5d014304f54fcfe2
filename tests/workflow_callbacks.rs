//! End-to-end: a workflow with a `callbackUrl` has each run's end told to
//! the caller once, through the callback relay: signed like a job's
//! callback, one delivery id across retries, with the run's status and
//! each node's state and execution id. A paused workflow's schedule starts
//! nothing, and its runs resume with it. On `kairos dev` (SQLite) and the
//! services stacks (MySQL, PostgreSQL).

use kairos_testkit::cluster as support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack};

/// The secret the test clusters sign callbacks with.
const SECRET: &[u8] = b"e2e-secret";
const LONG: Duration = Duration::from_secs(90);

/// One request the receiver saw.
#[derive(Debug, Clone)]
struct Receipt {
    delivery_id: String,
    body: Value,
    signature_ok: bool,
    accepted: bool,
}

/// Answers 503 to the first attempt of each delivery, then 200.
#[derive(Clone, Default)]
struct Receiver {
    receipts: Arc<Mutex<Vec<Receipt>>>,
}

async fn receive(State(rx): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let delivery_id = header("kairos-delivery-id");
    let now = kairos_core::time::now_ms() / 1000;
    let signature_ok =
        kairos_callback_relay::verify(SECRET, &header("kairos-signature"), &body, now, 300);
    let mut receipts = rx.receipts.lock().unwrap();
    let accepted = receipts.iter().any(|r| r.delivery_id == delivery_id);
    receipts.push(Receipt {
        delivery_id,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        signature_ok,
        accepted,
    });
    if accepted {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// a → b (fails) → c on failure: the run succeeds, b's failure handled.
fn workflow(url: &str) -> Value {
    json!({
        "name": "with-callback",
        "callbackUrl": url,
        "nodes": [
            {"id": "a", "handler": "noop"},
            {"id": "b", "handler": "fail", "params": {"message": "on purpose"}},
            {"id": "c", "handler": "noop"}
        ],
        "edges": [
            {"from": "a", "to": "b"},
            {"from": "b", "to": "c", "condition": "onFailure"}
        ]
    })
}

async fn a_run_end_is_delivered_signed(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    if stack.is_services() {
        cluster.wait_workers(1).await;
    }
    let rx = Receiver::default();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(rx.clone());
    let url = support::receiver::serve(app, "/hook").await;

    let (status, created) = cluster.post("/openapi/workflows", &workflow(&url)).await;
    assert_eq!(status, 201, "{created}");
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    let run = created["run"]["id"].as_str().unwrap().to_string();

    let accepted = testkit::wait_for("the run's callback accepted", LONG, || async {
        let receipts = rx.receipts.lock().unwrap();
        receipts.iter().find(|r| r.accepted).cloned()
    })
    .await;
    let detail = cluster
        .get(&format!("/openapi/workflows/{wf}/runs/{run}"))
        .await;
    assert_eq!(detail["status"], "succeeded", "{detail}");
    let body = &accepted.body;
    assert_eq!(body["event"], "workflow.run.ended", "{body}");
    assert_eq!(
        (body["workflowId"].as_str(), body["runId"].as_str()),
        (Some(wf.as_str()), Some(run.as_str()))
    );
    assert_eq!(body["status"], "succeeded");
    assert!(
        body["startedAt"].is_string() && body["finishedAt"].is_string(),
        "{body}"
    );
    let states: Vec<(&str, &str)> = body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["nodeId"].as_str().unwrap(), n["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [("a", "succeeded"), ("b", "failed"), ("c", "succeeded")]
    );
    for (sent, shown) in body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(detail["nodes"].as_array().unwrap())
    {
        assert!(sent["executionId"].is_string(), "{sent}");
        assert_eq!(sent["executionId"], shown["executionId"]);
    }

    // A paused workflow's schedule starts nothing; it goes on when resumed.
    let (status, paused) = cluster
        .post(&format!("/openapi/workflows/{wf}/pause"), &json!({}))
        .await;
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    let (status, changed) = cluster
        .patch(
            &format!("/openapi/workflows/{wf}"),
            &json!({"version": paused["version"], "everyMs": 300, "callbackUrl": null}),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    let (status, _) = cluster
        .post(&format!("/openapi/workflows/{wf}/trigger"), &json!({}))
        .await;
    assert_eq!(status, 409, "a paused workflow is not triggered");
    // Another workflow on the same schedule runs three times meanwhile: the
    // leader fired its rounds, and the paused one started nothing.
    let ticker =
        json!({"name": "ticker", "everyMs": 300, "nodes": [{"id": "t", "handler": "noop"}]});
    let (status, ticker) = cluster.post("/openapi/workflows", &ticker).await;
    assert_eq!(status, 201, "{ticker}");
    let tid = ticker["workflow"]["id"].as_str().unwrap().to_string();
    testkit::wait_for("three runs of the active workflow", LONG, || async {
        let runs = cluster.get(&format!("/openapi/workflows/{tid}/runs")).await;
        (runs["items"].as_array()?.len() >= 3).then_some(())
    })
    .await;
    let runs = cluster.get(&format!("/openapi/workflows/{wf}/runs")).await;
    assert_eq!(runs["items"].as_array().unwrap().len(), 1, "{runs}");
    let (status, _) = cluster
        .post(&format!("/openapi/workflows/{wf}/resume"), &json!({}))
        .await;
    assert_eq!(status, 200);
    testkit::wait_for("runs after the resume", LONG, || async {
        let runs = cluster.get(&format!("/openapi/workflows/{wf}/runs")).await;
        (runs["items"].as_array()?.len() >= 3).then_some(())
    })
    .await;
    for id in [&wf, &tid] {
        let (status, _) = cluster
            .send(
                reqwest::Method::DELETE,
                &format!("/openapi/workflows/{id}"),
                None,
            )
            .await;
        assert_eq!(status, 204);
    }

    let receipts = rx.receipts.lock().unwrap().clone();
    let first = &receipts[0];
    assert!(!first.accepted, "the first attempt was answered 503");
    for r in &receipts {
        assert!(r.signature_ok, "every request is signed: {r:?}");
    }
    let of_first: Vec<_> = receipts
        .iter()
        .filter(|r| r.body["runId"] == run.as_str())
        .collect();
    assert!(
        of_first.iter().all(|r| r.delivery_id == first.delivery_id),
        "one delivery id across attempts: {of_first:?}"
    );
    assert_eq!(
        of_first.iter().filter(|r| r.accepted).count(),
        1,
        "one accepted callback per run: {of_first:?}"
    );
    assert!(
        receipts.iter().all(|r| r.body["runId"] == run.as_str()),
        "runs after the callback URL was removed report nothing: {receipts:?}"
    );
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_run_end_callbacks_are_delivered_signed() {
    a_run_end_is_delivered_signed(Stack::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn services_run_end_callbacks_are_delivered_signed() {
    a_run_end_is_delivered_signed(Stack::Services).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_run_end_callbacks_are_delivered_signed() {
    a_run_end_is_delivered_signed(Stack::ServicesPg).await;
}
