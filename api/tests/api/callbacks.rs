//! Callback visibility and control: the deliveries of an execution with
//! their attempts, and redelivery of a finished one.

use super::support::App;
use kairos_core::callback::CallbackAttempt;
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::store::{CallbackNext, CallbackStore, Dispatch};
use kairos_core::time::{now_ms, parse_rfc3339};
use serde_json::{Value, json};

const HOOK: &str = "https://example.com/hooks/kairos";

/// Runs the job's first trigger to success the way the dispatcher does, so
/// the store queues its callback; the execution id.
pub async fn succeed_first_trigger(app: &App, job_id: &str) -> String {
    let (exec, _) = super::support::claim_first(app, job_id).await;
    let result = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: exec.clone(),
        attempt: 1,
        worker_id: "w1".into(),
        kind: ResultKind::Succeeded,
        output: Some(json!({"ok": true})),
        error: None,
        at: now_ms(),
        retryable: None,
        incarnation: None,
    };
    app.store
        .results_apply(std::slice::from_ref(&result), now_ms())
        .await
        .expect("apply result");
    result.execution_id
}

/// Leases the one due callback as a relay would and records an attempt.
pub async fn attempt_once(app: &App, code: u16, error: Option<&str>, next: CallbackNext) -> String {
    let claimed = app
        .store
        .callbacks_claim_due("relay-test", now_ms(), 60_000, 10)
        .await
        .expect("claim callbacks");
    assert_eq!(claimed.len(), 1, "one callback is due");
    let attempt = CallbackAttempt {
        attempt: claimed[0].attempts + 1,
        at: now_ms(),
        status_code: Some(code),
        latency_ms: 12,
        error: error.map(str::to_string),
    };
    let held = app
        .store
        .callback_record_attempt(&claimed[0].id, "relay-test", &attempt, next, now_ms())
        .await
        .expect("record attempt");
    assert!(held, "the lease is still ours");
    claimed[0].id.clone()
}

fn time(v: &Value) -> i64 {
    parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).expect("RFC 3339")
}

fn items(body: &Value) -> &Vec<Value> {
    body["items"].as_array().expect("items")
}

pub async fn callbacks_are_listed_and_redelivered(app: App) {
    let job_id = app
        .create(&json!({"jobName": "cb", "jobHandler": "noop", "callbackUrl": HOOK}))
        .await;
    let exec = succeed_first_trigger(&app, &job_id).await;
    let list = format!("/openapi/executions/{exec}/callbacks");
    let redeliver = format!("{list}/redeliver");

    // Queued with the terminal state, not yet attempted.
    let body = app.get(&list).await.ok(200);
    assert_eq!(items(&body).len(), 1, "{body}");
    let first = &items(&body)[0];
    let first_id = first["deliveryId"]
        .as_str()
        .expect("deliveryId")
        .to_string();
    assert_eq!(
        uuid::Uuid::parse_str(&first_id).unwrap().get_version_num(),
        7
    );
    assert_eq!(first["executionId"], exec.as_str());
    assert_eq!(first["jobId"], job_id.as_str());
    assert_eq!(first["url"], HOOK);
    assert_eq!(first["state"], "pending");
    assert_eq!(first["attempts"], 0);
    assert_eq!(first["lastError"], Value::Null);
    assert_eq!(first["attemptsLog"], json!([]));
    assert!(time(&first["nextAttemptAt"]) >= time(&first["createdAt"]));

    let err = app.post(&redeliver).await.error(409, "invalid_state");
    assert!(
        err["message"].as_str().unwrap().contains("pending"),
        "{err}"
    );

    // The relay gives up after one refused attempt.
    let leased = attempt_once(&app, 503, Some("upstream down"), CallbackNext::Dead).await;
    assert_eq!(leased, first_id);
    let body = app.get(&list).await.ok(200);
    let dead = &items(&body)[0];
    assert_eq!(dead["deliveryId"], first_id.as_str());
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["attempts"], 1);
    assert_eq!(dead["nextAttemptAt"], Value::Null);
    assert_eq!(dead["lastError"], "upstream down");
    let log = dead["attemptsLog"].as_array().expect("attemptsLog");
    assert_eq!(log.len(), 1, "{dead}");
    assert_eq!(log[0]["attempt"], 1);
    assert_eq!(log[0]["statusCode"], 503);
    assert_eq!(log[0]["latencyMs"], 12);
    assert_eq!(log[0]["error"], "upstream down");
    time(&log[0]["at"]);

    // A dead callback goes out again as a new delivery.
    let fresh = app.post(&redeliver).await.ok(202);
    let fresh_id = fresh["deliveryId"]
        .as_str()
        .expect("deliveryId")
        .to_string();
    assert_ne!(fresh_id, first_id);
    assert_eq!(
        uuid::Uuid::parse_str(&fresh_id).unwrap().get_version_num(),
        7
    );
    assert_eq!(fresh["executionId"], exec.as_str());
    assert_eq!(fresh["url"], HOOK);
    assert_eq!(fresh["state"], "pending");
    assert_eq!(fresh["attempts"], 0);
    assert_eq!(fresh["attemptsLog"], json!([]));
    time(&fresh["nextAttemptAt"]);
    let err = app.post(&redeliver).await.error(409, "invalid_state");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("pending") && message.contains(&fresh_id),
        "{message}"
    );

    let body = app.get(&list).await.ok(200);
    let ids: Vec<_> = items(&body)
        .iter()
        .map(|c| c["deliveryId"].clone())
        .collect();
    assert_eq!(ids, [json!(first_id), json!(fresh_id)], "oldest first");
    assert_eq!(items(&body)[0]["state"], "dead");
    assert_eq!(items(&body)[1], fresh);

    // A delivered callback can be redelivered too.
    attempt_once(&app, 200, None, CallbackNext::Delivered).await;
    let body = app.get(&list).await.ok(200);
    let delivered = &items(&body)[1];
    assert_eq!(delivered["state"], "delivered");
    assert_eq!(delivered["attemptsLog"][0]["statusCode"], 200);
    assert_eq!(delivered["attemptsLog"][0]["error"], Value::Null);
    let third = app.post(&redeliver).await.ok(202);
    assert_ne!(third["deliveryId"], fresh_id.as_str());
    assert_eq!(items(&app.get(&list).await.ok(200)).len(), 3);
}

pub async fn executions_without_callbacks_and_unknown_ones(app: App) {
    // The job has no callback URL, so its execution never gets one.
    let job_id = app
        .create(&json!({"jobName": "quiet", "jobHandler": "noop"}))
        .await;
    let exec = succeed_first_trigger(&app, &job_id).await;
    let list = format!("/openapi/executions/{exec}/callbacks");
    assert_eq!(app.get(&list).await.ok(200), json!({"items": []}));
    let err = app
        .post(&format!("{list}/redeliver"))
        .await
        .error(409, "invalid_state");
    assert!(
        err["message"].as_str().unwrap().contains("no callback"),
        "{err}"
    );

    let unknown = uuid::Uuid::now_v7();
    let list = format!("/openapi/executions/{unknown}/callbacks");
    let err = app.get(&list).await.error(404, "not_found");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&unknown.to_string()),
        "{err}"
    );
    app.post(&format!("{list}/redeliver"))
        .await
        .error(404, "not_found");
    let nothing = app.snapshot().await;
    assert_eq!(nothing.len(), 1, "a refused request creates nothing");
}
