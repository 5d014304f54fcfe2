//! Workflows through the API: create (idempotent, 422 naming the node of
//! an invalid DAG), read, list, trigger, a run with its nodes, cancel,
//! delete; tenant-scoped, roles and audit as for jobs.

use super::support::App;
use kairos_core::tenant::Role;
use serde_json::{Value, json};

/// 1 → 3 in parallel → 1.
pub fn diamond(name: &str) -> Value {
    json!({
        "name": name,
        "nodes": [
            {"id": "a", "handler": "noop", "params": {"step": "a"}},
            {"id": "b1", "handler": "noop"}, {"id": "b2", "handler": "noop", "maxAttempts": 2},
            {"id": "b3", "handler": "noop", "timeoutMs": 5000},
            {"id": "c", "handler": "noop"}
        ],
        "edges": [
            {"from": "a", "to": "b1"}, {"from": "a", "to": "b2"}, {"from": "a", "to": "b3"},
            {"from": "b1", "to": "c"}, {"from": "b2", "to": "c"}, {"from": "b3", "to": "c", "condition": "always"}
        ]
    })
}

pub async fn workflows_are_created_validated_run_and_cancelled(app: App) {
    let created = app
        .post_json("/openapi/workflows", &diamond("d"))
        .await
        .ok(201);
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["workflow"]["nodes"].as_array().unwrap().len(), 5);
    assert_eq!(created["workflow"]["edges"][5]["condition"], "always");
    assert_eq!(created["workflow"]["edges"][0]["condition"], "onSuccess");
    let run = created["run"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["run"]["status"], "running");

    let detail = app
        .get(&format!("/openapi/workflows/{wf}/runs/{run}"))
        .await
        .ok(200);
    let states: Vec<&str> = detail["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["pending", "waiting", "waiting", "waiting", "waiting"]
    );
    let exec = detail["nodes"][0]["executionId"].as_str().unwrap();
    let e = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(
        e["status"], "pending",
        "the root's execution is an ordinary one"
    );
    assert!(detail["nodes"][1]["executionId"].is_null());

    // Invalid graphs: 422 naming the node.
    let mut cyc = diamond("cyc");
    cyc["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "c", "to": "a"}));
    let err = app
        .post_json("/openapi/workflows", &cyc)
        .await
        .error(422, "invalid_workflow");
    assert_eq!(err["reason"], "cycle");
    assert!(err["node"].is_string(), "{err}");
    let mut unknown = diamond("u");
    unknown["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "c", "to": "zz"}));
    let err = app
        .post_json("/openapi/workflows", &unknown)
        .await
        .error(422, "invalid_workflow");
    assert_eq!(
        (err["reason"].as_str(), err["node"].as_str()),
        (Some("unknown_node"), Some("zz"))
    );
    let mut dup = diamond("dup");
    dup["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "b2", "handler": "noop"}));
    let err = app
        .post_json("/openapi/workflows", &dup)
        .await
        .error(422, "invalid_workflow");
    assert_eq!(err["node"], "b2");
    app.post_json(
        "/openapi/workflows",
        &json!({"name": "x", "nodes": [{"id": "a"}]}),
    )
    .await
    .error(422, "missing_field");

    // Idempotency.
    let mut keyed = diamond("k");
    keyed["clientRequestId"] = json!("wf-1");
    keyed["runNow"] = json!(false);
    let first = app.post_json("/openapi/workflows", &keyed).await.ok(201);
    assert!(first["run"].is_null(), "runNow false starts nothing");
    let again = app.post_json("/openapi/workflows", &keyed).await.ok(200);
    assert_eq!(again["workflow"]["id"], first["workflow"]["id"]);
    keyed["name"] = json!("other");
    app.post_json("/openapi/workflows", &keyed)
        .await
        .error(409, "idempotency_conflict");

    // A schedule: no run now, its next trigger shown.
    let mut cron = diamond("cron");
    cron["cronExpr"] = json!("0 0 2 * * *");
    cron["timezone"] = json!("Europe/Berlin");
    let scheduled = app.post_json("/openapi/workflows", &cron).await.ok(201);
    assert!(
        scheduled["run"].is_null(),
        "a scheduled workflow waits for its trigger"
    );
    assert_eq!(scheduled["workflow"]["cronExpr"], "0 0 2 * * *");
    assert_eq!(scheduled["workflow"]["timezone"], "Europe/Berlin");
    assert!(scheduled["workflow"]["nextTriggerAt"].is_string());
    cron["cronExpr"] = json!("not cron");
    app.post_json("/openapi/workflows", &cron)
        .await
        .error(422, "invalid_cron");
    let mut both = diamond("both");
    both["cronExpr"] = json!("0 0 2 * * *");
    both["everyMs"] = json!(1000);
    app.post_json("/openapi/workflows", &both)
        .await
        .error(422, "invalid_field");
    app.delete(&format!(
        "/openapi/workflows/{}",
        scheduled["workflow"]["id"].as_str().unwrap()
    ))
    .await;

    // Trigger, list runs, cancel.
    let kid = first["workflow"]["id"].as_str().unwrap();
    let r1 = app
        .post(&format!("/openapi/workflows/{kid}/trigger"))
        .await
        .ok(202);
    let r2 = app
        .post(&format!("/openapi/workflows/{kid}/trigger"))
        .await
        .ok(202);
    let runs = app
        .get(&format!("/openapi/workflows/{kid}/runs"))
        .await
        .ok(200);
    let ids: Vec<&str> = runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [r2["id"].as_str().unwrap(), r1["id"].as_str().unwrap()]
    );
    let r1id = r1["id"].as_str().unwrap();
    let cancelled = app
        .post(&format!("/openapi/workflows/{kid}/runs/{r1id}/cancel"))
        .await
        .ok(200);
    assert_eq!(cancelled["status"], "cancelled");
    app.post(&format!("/openapi/workflows/{kid}/runs/{r1id}/cancel"))
        .await
        .error(409, "invalid_state");
    let d = app
        .get(&format!("/openapi/workflows/{kid}/runs/{r1id}"))
        .await
        .ok(200);
    assert!(
        d["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["state"] == "cancelled")
    );

    let list = app.get("/openapi/workflows").await.ok(200);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    // The node jobs are not jobs of the tenant's list.
    let jobs = app.get("/openapi/jobs").await.ok(200);
    assert!(jobs["items"].as_array().unwrap().is_empty(), "{jobs}");

    // Another tenant sees nothing; a read key cannot change anything.
    let other = app.as_new_key("t-other", Role::Write).await;
    other
        .get(&format!("/openapi/workflows/{wf}"))
        .await
        .error(404, "not_found");
    other
        .get(&format!("/openapi/workflows/{wf}/runs/{run}"))
        .await
        .error(404, "not_found");
    other
        .post(&format!("/openapi/workflows/{wf}/trigger"))
        .await
        .error(404, "not_found");
    other
        .delete(&format!("/openapi/workflows/{wf}"))
        .await
        .error(404, "not_found");
    let reader = app.as_new_key("default", Role::Read).await;
    reader
        .post_json("/openapi/workflows", &diamond("r"))
        .await
        .error(403, "forbidden");
    reader
        .get(&format!("/openapi/workflows/{wf}"))
        .await
        .ok(200);

    // Delete cancels the running run.
    assert_eq!(
        app.delete(&format!("/openapi/workflows/{wf}")).await.status,
        204
    );
    app.delete(&format!("/openapi/workflows/{wf}"))
        .await
        .error(404, "not_found");
    let d = app
        .get(&format!("/openapi/workflows/{wf}/runs/{run}"))
        .await
        .ok(200);
    assert_eq!(d["status"], "cancelled");
    assert_eq!(
        app.get(&format!("/openapi/workflows/{wf}")).await.ok(200)["status"],
        "deleted"
    );
    app.post(&format!("/openapi/workflows/{wf}/trigger"))
        .await
        .error(404, "not_found");

    let audit = app.get("/openapi/audit").await.ok(200);
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    for a in [
        "workflow.create",
        "workflow.trigger",
        "workflow.run.cancel",
        "workflow.delete",
    ] {
        assert!(actions.contains(&a), "{a} audited: {actions:?}");
    }
}

pub async fn follow_ups_are_set_shown_and_checked(app: App) {
    let parent = app.create(&super::support::one_shot("parent")).await;
    let child = app
        .create(&json!({"jobName": "child", "jobHandler": "noop", "cronExpr": "0 0 1 1 *"}))
        .await;
    let path = format!("/openapi/jobs/{parent}/followups");
    assert_eq!(
        app.get(&path).await.ok(200),
        json!({"onSuccess": [], "onFailure": []})
    );
    let set = app
        .put_json(&path, &json!({"onSuccess": [child], "onFailure": []}))
        .await
        .ok(200);
    assert_eq!(set["onSuccess"], json!([child]));
    assert_eq!(app.get(&path).await.ok(200)["onSuccess"], json!([child]));
    let err = app
        .put_json(&path, &json!({"onFailure": ["nope"]}))
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "onFailure");
    let back = format!("/openapi/jobs/{child}/followups");
    let err = app
        .put_json(&back, &json!({"onSuccess": [parent]}))
        .await
        .error(422, "invalid_field");
    assert!(err["message"].as_str().unwrap().contains("cycle"), "{err}");
    app.get("/openapi/jobs/x/followups")
        .await
        .error(404, "not_found");
    let other = app.as_new_key("t-other2", Role::Write).await;
    other.get(&path).await.error(404, "not_found");
    let reader = app.as_new_key("default", Role::Read).await;
    reader
        .put_json(&path, &json!({"onSuccess": []}))
        .await
        .error(403, "forbidden");
}

/// Issue 44, finding 4: a workflow's nodes are jobs, and they used to be
/// created past the tenant's live-jobs cap (one action token per workflow,
/// however many nodes). Now each node counts, at create and for the new
/// jobs of a `PATCH` that changes a node's template.
pub async fn workflow_nodes_count_against_the_live_jobs_cap(app: App) {
    app.post_json(
        "/openapi/tenants",
        &json!({"tenantId": "capped", "maxLiveJobs": 6}),
    )
    .await
    .ok(201);
    let key = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "capped", "role": "write"}),
        )
        .await
        .ok(201);
    let capped = app.with_token(Some(key["keyToken"].as_str().unwrap().to_string()));
    // Five node jobs: 5 of 6.
    let created = capped
        .post_json("/openapi/workflows", &diamond("first"))
        .await
        .ok(201);
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    // Five more would make 10.
    let refused = capped
        .post_json("/openapi/workflows", &diamond("second"))
        .await;
    let err = refused.error(429, "live_job_limit");
    assert!(
        err["message"].as_str().unwrap().contains("limit is 6"),
        "{err}"
    );
    assert!(
        err["message"].as_str().unwrap().contains("workflow nodes"),
        "{err}"
    );
    let listed = capped.get("/openapi/workflows").await.ok(200);
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        1,
        "nothing stored"
    );
    // One plain job still fits (6 of 6), a second does not.
    capped.create(&super::support::one_shot("sixth")).await;
    capped
        .post_json("/openapi/jobs", &super::support::one_shot("seventh"))
        .await
        .error(429, "live_job_limit");
    // A PATCH that changes a node's template makes a new job for it.
    let mut nodes = diamond("first")["nodes"].clone();
    nodes[4]["handler"] = json!("sleep");
    capped
        .patch_json(
            &format!("/openapi/workflows/{wf}"),
            &json!({"version": created["workflow"]["version"], "nodes": nodes}),
        )
        .await
        .error(429, "live_job_limit");
    // One that renames it only creates nothing.
    capped
        .patch_json(
            &format!("/openapi/workflows/{wf}"),
            &json!({"version": created["workflow"]["version"], "name": "renamed"}),
        )
        .await
        .ok(200);
}
