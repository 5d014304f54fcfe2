//! End-to-end: every terminal execution of a job with a callback URL is told
//! to the caller exactly once, signed, with one delivery id across retries —
//! also when the relay is killed with SIGKILL mid-run and started again.

use kairos_testkit::cluster as support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack};

const SECRET: &[u8] = b"e2e-secret";

/// One request the receiver saw.
#[derive(Debug, Clone)]
struct Receipt {
    delivery_id: String,
    body: Value,
    signature_ok: bool,
    accepted: bool,
}

/// A callback receiver that answers 503 to the first `fail_first` attempts of
/// every delivery, then 200.
#[derive(Clone, Default)]
struct Receiver {
    receipts: Arc<Mutex<Vec<Receipt>>>,
    fail_first: usize,
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
    let seen = receipts
        .iter()
        .filter(|r| r.delivery_id == delivery_id)
        .count();
    let accepted = seen >= rx.fail_first;
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

async fn start_receiver(fail_first: usize) -> (String, Receiver) {
    let rx = Receiver {
        receipts: Arc::default(),
        fail_first,
    };
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(rx.clone());
    let url = support::receiver::serve(app, "/hook").await;
    (url, rx)
}

async fn fifty_jobs_get_exactly_one_accepted_callback_each(stack: Stack, kill_relay: bool) {
    let Some(mut cluster) = Cluster::start(stack, 2, 2).await else {
        return;
    };
    cluster
        .wait_workers(if stack.is_services() { 2 } else { 1 })
        .await;
    let (url, rx) = start_receiver(2).await;
    let mut ids = Vec::new();
    for i in 0..50 {
        let (handler, params) = if i % 5 == 0 {
            ("fail", json!({"message": "no luck"}))
        } else {
            ("noop", json!({"i": i}))
        };
        let id = cluster
            .create_job(json!({"jobName": format!("cb-{i}"), "jobHandler": handler, "params": params, "callbackUrl": url}))
            .await;
        ids.push(id);
        if kill_relay && i == 20 {
            cluster.signal("relay", "KILL");
            cluster.wait_exit("relay");
            cluster.spawn("relay", &["callback-relay"]);
        }
    }
    cluster
        .wait_jobs(&ids, &["succeeded", "failed"], Duration::from_secs(120))
        .await;
    // Killed relays hold leases on what they had claimed until the lease
    // expires, so allow for one lease period before everything is delivered.
    kairos_testkit::wait_for(
        "one accepted callback per job",
        Duration::from_secs(150),
        || async {
            let receipts = rx.receipts.lock().unwrap();
            let accepted = receipts.iter().filter(|r| r.accepted).count();
            (accepted >= ids.len()).then_some(())
        },
    )
    .await;
    let receipts = rx.receipts.lock().unwrap().clone();
    let mut by_job: HashMap<String, Vec<&Receipt>> = HashMap::new();
    for r in &receipts {
        assert!(
            r.signature_ok,
            "every request carries a valid signature: {r:?}"
        );
        by_job
            .entry(r.body["jobId"].as_str().unwrap_or_default().to_string())
            .or_default()
            .push(r);
    }
    for (i, id) in ids.iter().enumerate() {
        let got = by_job
            .get(id)
            .unwrap_or_else(|| panic!("no callback for job {id}"));
        let accepted: Vec<_> = got.iter().filter(|r| r.accepted).collect();
        assert_eq!(
            accepted.len(),
            1,
            "exactly one accepted callback for {id}: {got:?}"
        );
        assert!(got.len() >= 3, "503 twice, then accepted: {got:?}");
        let delivery = &got[0].delivery_id;
        assert!(
            got.iter().all(|r| &r.delivery_id == delivery),
            "one delivery id across attempts: {got:?}"
        );
        let body = &accepted[0].body;
        let expected = if i % 5 == 0 { "failed" } else { "succeeded" };
        assert_eq!(body["status"], expected, "{body}");
        assert!(
            body["executionId"].is_string() && body["finishedAt"].is_string(),
            "{body}"
        );
        if i % 5 == 0 {
            assert_eq!(body["error"], "no luck");
        } else {
            assert_eq!(body["output"], json!({"i": i}));
        }
    }
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn services_callbacks_survive_503s_and_a_killed_relay() {
    fifty_jobs_get_exactly_one_accepted_callback_each(Stack::Services, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_callbacks_survive_503s_and_a_killed_relay() {
    fifty_jobs_get_exactly_one_accepted_callback_each(Stack::ServicesPg, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_callbacks_survive_503s() {
    fifty_jobs_get_exactly_one_accepted_callback_each(Stack::Embedded, false).await;
}
