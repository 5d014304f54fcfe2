//! A caller's control of workflows through the API, as for jobs: `PATCH`
//! at the version read (409 `version_conflict`, 422 `invalid_workflow`
//! naming the node, runs already started keep their graph), pause and
//! resume (409 on the wrong state, a paused workflow's trigger 409), 404
//! for unknown or another tenant's ids, `write` keys only, audited.

use super::support::App;
use super::workflows::diamond;
use kairos_core::tenant::Role;
use serde_json::json;

pub async fn workflows_are_patched_paused_and_resumed(app: App) {
    let mut body = diamond("d");
    body["callbackUrl"] = json!("https://example.com/runs");
    let created = app.post_json("/openapi/workflows", &body).await.ok(201);
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    let run = created["run"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["workflow"]["version"], 1);
    assert_eq!(created["workflow"]["status"], "active");
    assert_eq!(
        created["workflow"]["callbackUrl"],
        "https://example.com/runs"
    );
    let path = format!("/openapi/workflows/{wf}");

    // A new graph: `a` → `z` only. The started run keeps the diamond.
    let patched = app
        .patch_json(
            &path,
            &json!({
                "version": 1,
                "name": "d2",
                "nodes": [{"id": "a", "handler": "noop"}, {"id": "z", "handler": "other"}],
                "edges": [{"from": "a", "to": "z", "condition": "always"}],
                "everyMs": 60000,
                "callbackUrl": null
            }),
        )
        .await
        .ok(200);
    assert_eq!(patched["version"], 2);
    assert_eq!(patched["name"], "d2");
    assert_eq!(patched["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(patched["everyMs"], 60000);
    assert!(patched["nextTriggerAt"].is_string());
    assert!(patched["callbackUrl"].is_null());
    let old = app.get(&format!("{path}/runs/{run}")).await.ok(200);
    assert_eq!(
        old["nodes"].as_array().unwrap().len(),
        5,
        "the run keeps its graph"
    );

    // Edges alone are checked against the current nodes: 422 naming the node.
    let err = app
        .patch_json(
            &path,
            &json!({"version": 2, "edges": [{"from": "a", "to": "b1"}]}),
        )
        .await
        .error(422, "invalid_workflow");
    assert_eq!(
        (err["reason"].as_str(), err["node"].as_str()),
        (Some("unknown_node"), Some("b1"))
    );
    let err = app
        .patch_json(
            &path,
            &json!({"version": 2, "edges": [{"from": "a", "to": "z"}, {"from": "z", "to": "a"}]}),
        )
        .await
        .error(422, "invalid_workflow");
    assert_eq!(err["reason"], "cycle");
    app.patch_json(&path, &json!({"version": 2, "callbackUrl": "ftp://x"}))
        .await
        .error(422, "invalid_url");
    app.patch_json(
        &path,
        &json!({"version": 2, "everyMs": 1000, "unscheduled": true}),
    )
    .await
    .error(422, "invalid_field");
    app.patch_json(&path, &json!({"version": 2, "colour": "red"}))
        .await
        .error(422, "unknown_field");
    app.patch_json(&path, &json!({"version": 1, "name": "late"}))
        .await
        .error(409, "version_conflict");
    app.patch_json("/openapi/workflows/nope", &json!({"version": 1}))
        .await
        .error(404, "not_found");
    let unscheduled = app
        .patch_json(&path, &json!({"version": 2, "unscheduled": true}))
        .await
        .ok(200);
    assert!(unscheduled["everyMs"].is_null() && unscheduled["nextTriggerAt"].is_null());

    // Pause: the trigger answers 409 as for a paused job; resume.
    let paused = app.post(&format!("{path}/pause")).await.ok(200);
    assert_eq!(
        (paused["status"].as_str(), paused["version"].as_i64()),
        (Some("paused"), Some(4))
    );
    app.post(&format!("{path}/pause"))
        .await
        .error(409, "invalid_state");
    app.post(&format!("{path}/trigger"))
        .await
        .error(409, "invalid_state");
    let listed = app.get("/openapi/workflows").await.ok(200);
    assert_eq!(listed["items"][0]["status"], "paused");
    let resumed = app.post(&format!("{path}/resume")).await.ok(200);
    assert_eq!(resumed["status"], "active");
    app.post(&format!("{path}/resume"))
        .await
        .error(409, "invalid_state");
    app.post(&format!("{path}/trigger")).await.ok(202);
    app.post("/openapi/workflows/nope/pause")
        .await
        .error(404, "not_found");
    app.post("/openapi/workflows/nope/resume")
        .await
        .error(404, "not_found");

    // Another tenant's id is unknown; a read key changes nothing.
    let other = app.as_new_key("t-other-wc", Role::Write).await;
    other
        .patch_json(&path, &json!({"version": 5, "name": "x"}))
        .await
        .error(404, "not_found");
    other
        .post(&format!("{path}/pause"))
        .await
        .error(404, "not_found");
    other
        .post(&format!("{path}/resume"))
        .await
        .error(404, "not_found");
    let reader = app.as_new_key("default", Role::Read).await;
    reader
        .patch_json(&path, &json!({"version": 5, "name": "x"}))
        .await
        .error(403, "forbidden");
    reader
        .post(&format!("{path}/pause"))
        .await
        .error(403, "forbidden");

    // Deleted: no change, no pause or resume.
    assert_eq!(app.delete(&path).await.status, 204);
    app.patch_json(&path, &json!({"version": 5, "name": "x"}))
        .await
        .error(409, "invalid_state");
    app.post(&format!("{path}/pause"))
        .await
        .error(409, "invalid_state");

    let audit = app.get("/openapi/audit").await.ok(200);
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    for a in ["workflow.edit", "workflow.pause", "workflow.resume"] {
        assert!(actions.contains(&a), "{a} audited: {actions:?}");
    }
}

/// A workflow's schedule takes a job's window and policies: shown, merged
/// by `PATCH`, refused with a job's 422s.
pub async fn workflow_schedules_take_job_policies(app: App) {
    let mut body = diamond("policies");
    body["everyMs"] = json!(60000);
    body["startAt"] = json!("2999-01-01T00:00:00.000Z");
    body["overlapPolicy"] = json!("forbid");
    let created = app.post_json("/openapi/workflows", &body).await.ok(201);
    let wf = &created["workflow"];
    assert_eq!(wf["startAt"], "2999-01-01T00:00:00.000Z");
    assert_eq!(wf["nextTriggerAt"], "2999-01-01T00:00:00.000Z");
    assert!(wf["endAt"].is_null());
    assert_eq!(
        (wf["misfirePolicy"].as_str(), wf["overlapPolicy"].as_str()),
        (Some("fireOnce"), Some("forbid"))
    );
    let path = format!("/openapi/workflows/{}", wf["id"].as_str().unwrap());
    let patched = app
        .patch_json(
            &path,
            &json!({"version": 1, "misfirePolicy": "skip", "startAt": null}),
        )
        .await
        .ok(200);
    assert_eq!(patched["misfirePolicy"], "skip");
    assert_eq!(patched["overlapPolicy"], "forbid", "kept");
    assert!(patched["startAt"].is_null());
    assert_ne!(patched["nextTriggerAt"], "2999-01-01T00:00:00.000Z");
    app.patch_json(&path, &json!({"version": 2, "overlapPolicy": "never"}))
        .await
        .error(422, "invalid_field");
    let mut bad = diamond("bad");
    bad["misfirePolicy"] = json!("skip");
    app.post_json("/openapi/workflows", &bad)
        .await
        .error(422, "invalid_field");
    let manual = app
        .post_json("/openapi/workflows", &diamond("manual"))
        .await
        .ok(201);
    assert!(manual["workflow"]["misfirePolicy"].is_null());
    assert!(manual["workflow"]["overlapPolicy"].is_null());
    let mut delayed = diamond("delayed");
    delayed["delayMs"] = json!(5000);
    let delayed = app.post_json("/openapi/workflows", &delayed).await.ok(201);
    assert_eq!(delayed["workflow"]["delayMs"], 5000);
    assert!(delayed["workflow"]["everyMs"].is_null());
    assert_eq!(delayed["workflow"]["misfirePolicy"], "fireOnce");
}
