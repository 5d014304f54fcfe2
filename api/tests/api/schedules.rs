//! Schedule fields on create, get and list; skipped and stop-requested
//! executions as callers see them; all of it in the OpenAPI document.

use super::support::App;
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::store::DispatchScope;
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::time::{now_ms, parse_rfc3339};
use serde_json::{Value, json};

pub async fn recurring_jobs_show_their_schedule_fields(app: App) {
    let created = app
        .post_json(
            "/openapi/jobs",
            &json!({
                "jobName": "rate", "jobHandler": "noop", "everyMs": 60000,
                "startAt": "2099-01-01T00:00:00Z", "endAt": "2099-01-02T00:00:00+01:00",
                "misfirePolicy": "fireAll", "overlapPolicy": "forbid"
            }),
        )
        .await
        .ok(201);
    assert_eq!(created["nextTriggerAt"], "2099-01-01T00:00:00.000Z");
    let id = created["jobId"].as_str().unwrap().to_string();
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    let expect = json!({
        "cronExpr": null, "timezone": null, "triggerAt": null, "everyMs": 60000,
        "delayMs": null, "startAt": "2099-01-01T00:00:00.000Z",
        "endAt": "2099-01-01T23:00:00.000Z", "misfirePolicy": "fireAll", "overlapPolicy": "forbid"
    });
    for (k, v) in expect.as_object().unwrap() {
        assert_eq!(&job[k], v, "{k}");
    }

    let delay = app
        .create(&json!({"jobName": "d", "jobHandler": "noop", "delayMs": 1500}))
        .await;
    let d = app.get(&format!("/openapi/jobs/{delay}")).await.ok(200);
    assert_eq!(
        (d["delayMs"].clone(), d["everyMs"].clone()),
        (json!(1500), Value::Null)
    );
    assert_eq!(
        (d["misfirePolicy"].clone(), d["overlapPolicy"].clone()),
        (json!("fireOnce"), json!("allow"))
    );
    assert_eq!(
        (d["startAt"].clone(), d["endAt"].clone()),
        (Value::Null, Value::Null)
    );

    let once = app.create(&super::support::one_shot("o")).await;
    let o = app.get(&format!("/openapi/jobs/{once}")).await.ok(200);
    for k in [
        "everyMs",
        "delayMs",
        "startAt",
        "endAt",
        "misfirePolicy",
        "overlapPolicy",
    ] {
        assert_eq!(o[k], Value::Null, "{k} of a one-shot");
    }
    let listed = app.get("/openapi/jobs").await.ok(200);
    let rate = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == id.as_str())
        .expect("listed");
    assert_eq!(rate["everyMs"], 60000);
    assert_eq!(rate["overlapPolicy"], "forbid");

    let before = app.snapshot().await;
    for (body, field) in [
        (json!({"cronExpr": "* * * * *", "delayMs": 1000}), "delayMs"),
        (json!({"everyMs": 50}), "everyMs"),
        (json!({"overlapPolicy": "forbid"}), "overlapPolicy"),
        (
            json!({"everyMs": 1000, "misfirePolicy": "sometimes"}),
            "misfirePolicy",
        ),
        (
            json!({"everyMs": 1000, "endAt": "2000-01-01T00:00:00Z"}),
            "endAt",
        ),
    ] {
        let mut b = super::support::one_shot("bad");
        for (k, v) in body.as_object().unwrap() {
            b[k] = v.clone();
        }
        let err = app
            .post_json("/openapi/jobs", &b)
            .await
            .error(422, "invalid_field");
        assert_eq!(err["field"], field, "{body}");
    }
    assert_eq!(app.snapshot().await, before);
}

pub async fn skipped_and_stop_requested_executions_are_visible(app: App) {
    let id = app
        .create(&json!({
            "jobName": "f", "jobHandler": "noop", "everyMs": 1000, "overlapPolicy": "forbid"
        }))
        .await;
    let job = app.store.job_get("default", &id).await.unwrap().unwrap();
    let due = job.next_trigger_at.unwrap();
    let claim = |job| kairos_core::trigger::claims_for([job], due);
    let work = app
        .store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claim(job), due)
        .await
        .unwrap()
        .work;
    let started = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: work[0].execution_id.clone(),
        attempt: 1,
        worker_id: "w1".into(),
        kind: ResultKind::Started,
        output: None,
        error: None,
        at: due + 5,
        retryable: None,
        incarnation: None,
    };
    app.store.results_apply(&[started], due + 5).await.unwrap();
    let job = app.store.job_get("default", &id).await.unwrap().unwrap();
    let next = job.next_trigger_at.unwrap();
    let claims = kairos_core::trigger::claims_for([job], next);
    assert!(
        app.store
            .triggers_claim(DispatchScope::All { fence: 1 }, &claims, next)
            .await
            .unwrap()
            .work
            .is_empty()
    );

    let page = app
        .get(&format!("/openapi/jobs/{id}/executions"))
        .await
        .ok(200);
    let states: Vec<_> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(states, [json!("skipped"), json!("running")]);
    assert!(
        page["items"][0]["error"]
            .as_str()
            .unwrap()
            .contains("forbid")
    );

    let before = now_ms();
    let cancelled = app.delete(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(cancelled["status"], "cancelled");
    let exec = app
        .get(&format!("/openapi/executions/{}", work[0].execution_id))
        .await
        .ok(200);
    assert_eq!(
        exec["status"], "running",
        "a worker holds it: asked to stop"
    );
    let asked = parse_rfc3339(exec["stopRequestedAt"].as_str().expect("stopRequestedAt")).unwrap();
    assert!(asked >= before - 1);
    assert_eq!(page["items"][0]["stopRequestedAt"], Value::Null);
}

pub async fn openapi_documents_schedules_and_patch(app: App) {
    let doc = app.get("/openapi.json").await.ok(200);
    let patch = &doc["paths"]["/openapi/jobs/{id}"]["patch"];
    assert!(patch.is_object(), "PATCH is not documented");
    for code in ["200", "404", "409", "422"] {
        assert!(patch["responses"][code].is_object(), "PATCH {code}");
    }
    let schemas = &doc["components"]["schemas"];
    for field in [
        "everyMs",
        "delayMs",
        "startAt",
        "endAt",
        "misfirePolicy",
        "overlapPolicy",
    ] {
        assert!(
            schemas["CreateJobRequest"]["properties"][field].is_object(),
            "create {field}"
        );
        assert!(
            schemas["PatchJobRequest"]["properties"][field].is_object(),
            "patch {field}"
        );
        assert!(
            schemas["JobView"]["properties"][field].is_object(),
            "view {field}"
        );
    }
    assert_eq!(schemas["PatchJobRequest"]["required"], json!(["version"]));
    assert!(schemas["ExecutionView"]["properties"]["stopRequestedAt"].is_object());
    let text = doc.to_string();
    for value in ["fireOnce", "fireAll", "forbid", "replace", "skipped"] {
        assert!(
            text.contains(&format!("\"{value}\"")),
            "{value} not in the document"
        );
    }
}
