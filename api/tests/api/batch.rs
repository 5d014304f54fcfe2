//! `POST /openapi/jobs/batch`: per-item results, one transaction.

use super::support::{App, one_shot};
use serde_json::{Value, json};

pub async fn batch_create_answers_each_item(app: App) {
    let replayed = json!({"jobName": "r", "jobHandler": "noop", "clientRequestId": "k-1"});
    app.post_json("/openapi/jobs", &replayed).await.ok(201);
    let body = json!({"jobs": [
        one_shot("a"),
        {"jobName": "bad", "jobHandler": "noop", "cronExpr": "not cron"},
        replayed,
        {"jobName": "changed", "jobHandler": "noop", "clientRequestId": "k-1"},
        {"jobName": "twice", "jobHandler": "noop", "clientRequestId": "k-2"},
        {"jobName": "twice", "jobHandler": "noop", "clientRequestId": "k-2"},
        {"jobName": "x", "jobHandler": "noop", "surprise": 1},
        one_shot("b"),
    ]});
    let out = app.post_json("/openapi/jobs/batch", &body).await.ok(200);
    let results = out["results"].as_array().expect("results");
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        vec![201, 422, 200, 409, 201, 200, 422, 201],
        "{out}"
    );
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["index"], i);
    }
    assert_eq!(results[1]["error"]["code"], "invalid_cron", "{out}");
    assert_eq!(results[3]["error"]["code"], "idempotency_conflict", "{out}");
    assert_eq!(results[6]["error"]["code"], "unknown_field", "{out}");
    assert_eq!(results[4]["job"]["jobId"], results[5]["job"]["jobId"]);
    // The created ones are stored; the refused ones are not.
    for i in [0, 4, 7] {
        let id = results[i]["job"]["jobId"].as_str().unwrap();
        let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
        assert_eq!(job["status"], "scheduled");
    }
    let names: Vec<Value> = app.get("/openapi/jobs?limit=100").await.ok(200)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobName"].clone())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}

pub async fn batch_size_is_bounded(app: App) {
    app.post_json("/openapi/jobs/batch", &json!({"jobs": []}))
        .await
        .error(422, "invalid_field");
    let many: Vec<Value> = (0..1001).map(|i| one_shot(&format!("j{i}"))).collect();
    app.post_json("/openapi/jobs/batch", &json!({"jobs": many}))
        .await
        .error(422, "invalid_field");
    app.post_json("/openapi/jobs/batch", &json!([one_shot("x")]))
        .await
        .error(422, "invalid_field");
    assert!(app.snapshot().await.is_empty(), "nothing was created");
}
