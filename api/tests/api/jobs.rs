//! Create, read and list: response shapes, paging and idempotent create.

use super::support::App;
use kairos_core::due::Due;
use kairos_core::time::{now_ms, parse_rfc3339};
use serde_json::{Value, json};

fn time(v: &Value) -> i64 {
    parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).expect("RFC 3339")
}

pub async fn create_get_list_and_execution_shapes(app: App) {
    let before = now_ms();
    let created = app
        .post_json(
            "/openapi/jobs",
            &json!({
                "jobName": "report", "jobHandler": "noop", "params": {"a": [1, 2]},
                "triggerAt": "2099-01-01T00:00:00Z", "callbackUrl": "https://example.com/hook",
                "maxAttempts": 3, "retryBackoffMs": 250, "timeoutMs": 5000
            }),
        )
        .await
        .ok(201);
    assert_eq!(created["status"], "scheduled");
    assert_eq!(created["nextTriggerAt"], "2099-01-01T00:00:00.000Z");
    let id = created["jobId"].as_str().unwrap().to_string();
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);
    assert_eq!(
        app.due.lock().unwrap().as_slice(),
        &[Due::At(time(&created["nextTriggerAt"]))]
    );

    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["jobId"], id.as_str());
    assert_eq!(job["jobName"], "report");
    assert_eq!(job["jobHandler"], "noop");
    assert_eq!(job["params"], json!({"a": [1, 2]}));
    assert_eq!(job["cronExpr"], Value::Null);
    assert_eq!(job["timezone"], Value::Null);
    assert_eq!(job["triggerAt"], "2099-01-01T00:00:00.000Z");
    assert_eq!(job["status"], "scheduled");
    assert_eq!(job["nextTriggerAt"], "2099-01-01T00:00:00.000Z");
    assert!(job["version"].is_i64());
    assert_eq!(job["callbackUrl"], "https://example.com/hook");
    assert_eq!(job["clientRequestId"], Value::Null);
    assert_eq!(job["maxAttempts"], 3);
    assert_eq!(job["retryBackoffMs"], 250);
    assert_eq!(job["timeoutMs"], 5000);
    assert!(time(&job["createdAt"]) >= before - 1);
    assert!(time(&job["updatedAt"]) >= time(&job["createdAt"]));
    assert_eq!(job["lastExecution"], Value::Null);

    let cron = app
        .create(&json!({
            "jobName": "tick", "jobHandler": "noop",
            "cronExpr": "0 0 9 * * *", "timezone": "Asia/Shanghai"
        }))
        .await;
    let cron_job = app.get(&format!("/openapi/jobs/{cron}")).await.ok(200);
    assert_eq!(cron_job["cronExpr"], "0 0 9 * * *");
    assert_eq!(cron_job["timezone"], "Asia/Shanghai");
    assert_eq!(cron_job["triggerAt"], Value::Null);
    assert_eq!(cron_job["maxAttempts"], 1);
    assert_eq!(cron_job["retryBackoffMs"], 1000);
    assert_eq!(cron_job["timeoutMs"], Value::Null);
    assert!(
        cron_job["nextTriggerAt"]
            .as_str()
            .unwrap()
            .ends_with("T01:00:00.000Z")
    );

    // Newest first, paged by the cursor.
    let all = app.get("/openapi/jobs").await.ok(200);
    let ids: Vec<_> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobId"].clone())
        .collect();
    assert_eq!(ids, vec![json!(cron), json!(id)]);
    assert_eq!(all["nextCursor"], Value::Null);
    let first = app.get("/openapi/jobs?limit=1").await.ok(200);
    assert_eq!(first["items"][0]["jobId"], cron.as_str());
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let second = app
        .get(&format!("/openapi/jobs?limit=1&cursor={cursor}"))
        .await
        .ok(200);
    assert_eq!(second["items"][0]["jobId"], id.as_str());
    let scheduled = app
        .get("/openapi/jobs?status=scheduled&limit=500")
        .await
        .ok(200);
    assert_eq!(scheduled["items"].as_array().unwrap().len(), 2);
    let paused = app.get("/openapi/jobs?status=paused").await.ok(200);
    assert_eq!(paused, json!({"items": [], "nextCursor": null}));

    let none = app
        .get(&format!("/openapi/jobs/{id}/executions"))
        .await
        .ok(200);
    assert_eq!(none, json!({"items": [], "nextCursor": null}));

    // An execution added by a manual trigger shows everywhere.
    let triggered = app
        .post(&format!("/openapi/jobs/{id}/trigger"))
        .await
        .ok(202);
    assert_eq!(triggered["jobId"], id.as_str());
    let exec_id = triggered["executionId"].as_str().unwrap().to_string();
    let page = app
        .get(&format!("/openapi/jobs/{id}/executions?limit=10"))
        .await
        .ok(200);
    assert_eq!(page["nextCursor"], Value::Null);
    let exec = &page["items"][0];
    assert_eq!(exec["executionId"], exec_id.as_str());
    assert_eq!(exec["jobId"], id.as_str());
    assert_eq!(exec["status"], "pending");
    assert_eq!(exec["attempt"], 1);
    for key in [
        "workerId",
        "dispatchedAt",
        "startedAt",
        "finishedAt",
        "output",
        "error",
    ] {
        assert_eq!(exec[key], Value::Null, "{key}");
    }
    time(&exec["scheduledAt"]);
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["lastExecution"]["executionId"], exec_id.as_str());
    let detail = app
        .get(&format!("/openapi/executions/{exec_id}"))
        .await
        .ok(200);
    assert_eq!(detail["executionId"], exec_id.as_str());
    assert_eq!(detail["status"], "pending");
    for event in detail["events"].as_array().expect("events") {
        assert!(event["status"].is_string() && event["attempt"].is_u64());
        time(&event["at"]);
        assert!(event.get("workerId").is_some() && event.get("error").is_some());
    }
}

pub async fn idempotent_create_replays_and_conflicts(app: App) {
    let body = json!({
        "jobName": "once", "jobHandler": "noop", "params": {"x": 1, "y": 2},
        "clientRequestId": "req-1", "triggerAt": "2099-01-01T08:00:00+08:00"
    });
    let first = app.post_json("/openapi/jobs", &body).await.ok(201);
    // Same request, other key order, defaults spelled out, same instant.
    let same = json!({
        "params": {"y": 2, "x": 1}, "jobHandler": "noop", "jobName": "once",
        "clientRequestId": "req-1", "triggerAt": "2099-01-01T00:00:00Z",
        "timezone": "UTC", "maxAttempts": 1
    });
    let replay = app.post_json("/openapi/jobs", &same).await.ok(200);
    assert_eq!(replay, first);
    assert_eq!(app.due.lock().unwrap().len(), 1, "a replay wakes nobody");

    let before = app.snapshot().await;
    let mut other = body.clone();
    other["params"] = json!({"x": 2});
    let err = app
        .post_json("/openapi/jobs", &other)
        .await
        .error(409, "idempotency_conflict");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("req-1") && message.contains(first["jobId"].as_str().unwrap()),
        "{message}"
    );
    assert_eq!(app.snapshot().await, before);

    // Another key is another job.
    let mut fresh = body.clone();
    fresh["clientRequestId"] = json!("req-2");
    let second = app.post_json("/openapi/jobs", &fresh).await.ok(201);
    assert_ne!(second["jobId"], first["jobId"]);
    assert_eq!(app.snapshot().await.len(), 2);
}
